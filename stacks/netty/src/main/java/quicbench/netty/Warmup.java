package quicbench.netty;

import io.netty.channel.Channel;

import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Runs the JVM's cold path before anything is measured: an in-process server on the loopback
 * address (its own UDP port, never the lab's listener or path) serves a 1 MiB file to this
 * process's own client, over {@code connections} new connections and then as many streams of one
 * connection, verified as a trial's. Class loading and the JIT's first compilations happen here,
 * so that a row measures the stack, not the JVM's start.
 */
final class Warmup {
    static final int CONNECTIONS = 8;
    static final int BYTES = 1 << 20;

    private Warmup() {
    }

    static void run(Transport transport, File cert, File key, int connections) throws Exception {
        Path dir = Files.createTempDirectory("quicbench-netty-warmup");
        try {
            byte[] body = new byte[BYTES];
            new Random(43).nextBytes(body);
            Files.write(dir.resolve("warmup.bin"), body);
            String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(body));
            Map<String, GetFiles.Entry> manifest = Map.of("warmup.bin", new GetFiles.Entry(BYTES, sha));
            ContentRoot root = new ContentRoot(dir, List.of());
            Channel server = transport.bootstrap()
                    .handler(FileServer.codec(transport, cert, key, root, "cubic", null))
                    .bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
            try {
                InetSocketAddress at = (InetSocketAddress) server.localAddress();
                String host = LabTrust.firstDnsName(cert.getPath());
                var trust = LabTrust.of(cert.getPath(), host, true);     // its chain checked as a real one
                for (boolean perObject : new boolean[] {true, false}) {
                    GetFiles g = new GetFiles(transport, at, host, trust, "/warmup.bin", connections,
                            perObject ? Math.min(4, connections) : connections, perObject, manifest, null);
                    boolean done = g.fetch(60);
                    List<String> failed = g.failures();
                    if (!done || !failed.isEmpty()) {
                        System.err.println("quicbench-netty: warm-up: " + failed.size() + " of " + connections
                                + " fetches failed" + (failed.isEmpty() ? "" : ", first: " + failed.get(0)));
                    }
                }
            } finally {
                server.close().sync();
            }
        } finally {
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }
}
