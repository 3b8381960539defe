package replay

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// originCert is a self-signed certificate whose only SAN is host.
func originCert(t *testing.T, host string, key *ecdsa.PrivateKey) tls.Certificate {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Every origin is served under its own certificate (chosen by SNI) over HTTP/2 and HTTP/3.
func TestServesEachOriginWithItsCertificateOverH2AndH3(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	port := freePort(t)
	a := New([]*Entry{
		{Entry: 0, Method: "GET", Host: "www.a.test", Port: port, Path: "/", Status: 200, Data: []byte("page a")},
		{Entry: 1, Method: "GET", Host: "cdn.b.test", Port: port, Path: "/x.js", Status: 200, Data: []byte("script b")},
	})
	certs := []tls.Certificate{originCert(t, "www.a.test", key), originCert(t, "cdn.b.test", key)}
	s, err := Listen(a, "127.0.0.1", port, certs, "", true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	check := func(proto string, c *http.Client, host, path, want string) {
		t.Helper()
		resp, err := c.Get("https://" + host + ":" + strconv.Itoa(port) + path)
		if err != nil {
			t.Fatalf("%s %s: %v", proto, host, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != want || resp.Header.Get("X-Qb-Replay") != "hit" {
			t.Fatalf("%s %s%s: %q %v", proto, host, path, body, resp.Header)
		}
		if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != host {
			t.Fatalf("%s %s: certificate for %v", proto, host, got)
		}
		if (proto == "h3") != (resp.ProtoMajor == 3) || (proto == "h2" && resp.ProtoMajor != 2) {
			t.Fatalf("%s %s: served over %s", proto, host, resp.Proto)
		}
	}
	insecure := &tls.Config{InsecureSkipVerify: true}
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial,
		TLSClientConfig: insecure, ForceAttemptHTTP2: true}}
	for _, c := range []struct{ host, path, want string }{{"www.a.test", "/", "page a"}, {"cdn.b.test", "/x.js", "script b"}} {
		check("h2", h2, c.host, c.path, c.want)
	}
	// h3: the names resolve nowhere here: each request goes to the listener under its name (SNI, :authority)
	h3 := &http.Client{Timeout: 5 * time.Second, Transport: roundTripToAddr{insecure, addr}}
	for _, c := range []struct{ host, path, want string }{{"www.a.test", "/", "page a"}, {"cdn.b.test", "/x.js", "script b"}} {
		check("h3", h3, c.host, c.path, c.want)
	}
}

// roundTripToAddr sends each request to addr, keeping its URL's host for SNI and :authority.
type roundTripToAddr struct {
	tls  *tls.Config
	addr string
}

func (r roundTripToAddr) RoundTrip(req *http.Request) (*http.Response, error) {
	cfg := r.tls.Clone()
	cfg.ServerName = req.URL.Hostname()
	out := req.Clone(req.Context())
	out.URL.Host = r.addr
	out.Host = req.URL.Host
	return (&http3.Transport{TLSClientConfig: cfg}).RoundTrip(out)
}
