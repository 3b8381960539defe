package quicbench.netty;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Locale;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedTrustManager;
import javax.net.ssl.X509TrustManager;

/** Trusts the server's chain only if it leads to the lab's CA and its certificate names the host. */
final class LabTrust extends X509ExtendedTrustManager {
    private final X509TrustManager chain;
    private final String host;

    private LabTrust(X509TrustManager chain, String host) {
        this.chain = chain;
        this.host = host.toLowerCase(Locale.ROOT);
    }

    static LabTrust of(String caFile, String host) throws IOException, GeneralSecurityException {
        return of(caFile, host, false);
    }

    /**
     * issuersOnly: trust only the file's certificates after its first (a server's chain file: its
     * CA), so that the leaf is verified against its issuer as a real server's is.
     */
    static LabTrust of(String caFile, String host, boolean issuersOnly) throws IOException, GeneralSecurityException {
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        try (InputStream in = new FileInputStream(caFile)) {
            int n = 0;
            var certs = List.copyOf(CertificateFactory.getInstance("X.509").generateCertificates(in));
            for (var c : issuersOnly && certs.size() > 1 ? certs.subList(1, certs.size()) : certs) {
                ks.setCertificateEntry("ca" + n++, c);
            }
            if (n == 0) {
                throw new CertificateException(caFile + " holds no certificate");
            }
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        for (TrustManager tm : tmf.getTrustManagers()) {
            if (tm instanceof X509TrustManager x) {
                return new LabTrust(x, host);
            }
        }
        throw new GeneralSecurityException("no X.509 trust manager");
    }

    /** The first DNS name of the first certificate in a PEM file (its leaf). */
    static String firstDnsName(String certFile) throws IOException, GeneralSecurityException {
        try (InputStream in = new FileInputStream(certFile)) {
            X509Certificate leaf = (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
            var names = leaf.getSubjectAlternativeNames();
            for (List<?> n : names == null ? List.<List<?>>of() : names) {
                if (n.size() == 2 && Integer.valueOf(2).equals(n.get(0))) {
                    return String.valueOf(n.get(1));
                }
            }
        }
        throw new CertificateException(certFile + ": its certificate has no DNS name");
    }

    private void check(X509Certificate[] certs, String authType) throws CertificateException {
        chain.checkServerTrusted(certs, authType);
        var names = certs[0].getSubjectAlternativeNames();
        for (List<?> n : names == null ? List.<List<?>>of() : names) {
            if (n.size() == 2 && Integer.valueOf(2).equals(n.get(0)) && matches(String.valueOf(n.get(1)))) {
                return;
            }
        }
        throw new CertificateException("the server's certificate does not name " + host);
    }

    private boolean matches(String name) {
        name = name.toLowerCase(Locale.ROOT);
        if (name.startsWith("*.")) {
            int dot = host.indexOf('.');
            return dot > 0 && host.substring(dot).equals(name.substring(1));
        }
        return name.equals(host);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] certs, String authType) throws CertificateException {
        check(certs, authType);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] certs, String authType, Socket s) throws CertificateException {
        check(certs, authType);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] certs, String authType, SSLEngine e) throws CertificateException {
        check(certs, authType);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] certs, String authType) throws CertificateException {
        throw new CertificateException("a client only");
    }

    @Override
    public void checkClientTrusted(X509Certificate[] certs, String authType, Socket s) throws CertificateException {
        throw new CertificateException("a client only");
    }

    @Override
    public void checkClientTrusted(X509Certificate[] certs, String authType, SSLEngine e) throws CertificateException {
        throw new CertificateException("a client only");
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
        return chain.getAcceptedIssuers();
    }
}
