package quicbench.netty;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http3.DefaultHttp3HeadersFrame;
import io.netty.handler.codec.http3.Http3;
import io.netty.handler.codec.http3.Http3ClientConnectionHandler;
import io.netty.handler.codec.http3.Http3DataFrame;
import io.netty.handler.codec.http3.Http3HeadersFrame;
import io.netty.handler.codec.http3.Http3RequestStreamInboundHandler;
import io.netty.handler.codec.quic.QLogConfiguration;
import io.netty.handler.codec.quic.QuicChannel;
import io.netty.handler.codec.quic.QuicChannelBootstrap;
import io.netty.handler.codec.quic.QuicChannelOption;
import io.netty.handler.codec.quic.QuicClientCodecBuilder;
import io.netty.handler.codec.quic.QuicSslContext;
import io.netty.handler.codec.quic.QuicSslContextBuilder;
import io.netty.handler.codec.quic.QuicStreamChannel;
import io.netty.util.ReferenceCountUtil;

import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.Reader;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.X509TrustManager;

/**
 * Go-Quick's getFiles over HTTP/3 on Netty: {@code --count} objects ({@code {i}} of
 * {@code --path-template} = 1..count), {@code --parallel} in flight, on one connection
 * ({@code --connections shared}) or a new connection each ({@code per-object}). Every body is
 * hashed as it arrives and checked against the content manifest; each request's times go to
 * {@code --requests} (one JSON line each) and the summary to standard output, as qb-load writes them.
 */
final class GetFiles {
    static final Set<String> OPTIONS = Set.of("--connect", "--host", "--ca", "--path-template", "--count",
            "--parallel", "--connections", "--manifest", "--requests", "--timeout", "--qlog-dir", "--warmup",
            "--warmup-cert", "--warmup-key", "--max-data", "--max-stream-data");
    // the receive windows the client starts with (quiche's own example client's): quiche grows a
    // window that the transfer uses up within about two round trips, up to its 24 / 16 MiB caps
    static final long MAX_DATA = 10_000_000;
    static final long MAX_STREAM_DATA = 1_000_000;
    static final long MIN_GAP_NS = 1_000_000;      // shorter gaps are the reader's own scheduling
    static final int MAX_GAPS = 4096;
    static final int MAX_ERRORS = 10;
    static final String USER_AGENT = "quicbench-netty/" + Versions.SELF;

    record Entry(long size, String sha256) {
    }

    /** One request and what became of it. */
    static final class Req {
        final int i;
        final String path;
        Conn conn;
        boolean reused;
        Long startNs;
        Long firstByteNs;
        Long lastByteNs;
        long endNs;
        long lastData;
        long bytes;
        Integer status;
        long contentLength = -1;
        String proto;
        String error;
        boolean done;
        long stallNs;
        final List<long[]> gaps = new ArrayList<>();
        boolean gapsTruncated;
        final MessageDigest sha;      // the verifier's only
        String digest;                // the body's, once the verifier has it
        boolean ended;                // the stream's end came: finished when the digest is in

        Req(int i, String path) {
            this.i = i;
            this.path = path;
            try {
                sha = MessageDigest.getInstance("SHA-256");
            } catch (NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** One QUIC connection (its own UDP socket). */
    static final class Conn {
        final int id;
        final long connectStartNs;
        Long connectDoneNs;
        Channel udp;
        QuicChannel quic;
        String alpn;
        String error;
        int assigned;
        final List<Req> waiting = new ArrayList<>();
        final List<Req> inFlight = new ArrayList<>();

        Conn(int id) {
            this.id = id;
            this.connectStartNs = Clock.nowNs();
        }
    }

    private final InetSocketAddress server;
    private final String host;
    private final int port;
    private final boolean perObject;
    private final int parallel;
    private final Map<String, Entry> manifest;
    private final Path qlogDir;
    private final Req[] reqs;
    private final Transport transport;
    private final QuicClientCodecBuilder codec;
    private final EventLoop loop;
    private final CountDownLatch allDone;
    private final List<Conn> conns = new ArrayList<>();
    private int next;          // the next request to start (event loop only)
    private Conn shared;       // the one connection of a shared policy
    private boolean stopping;

    /** One fetch of count objects (path {@code template}, {i} = 1..count) from server, verified with trust. */
    GetFiles(Transport transport, InetSocketAddress server, String host, X509TrustManager trust, String template,
             int count, int parallel, boolean perObject, Map<String, Entry> manifest, Path qlogDir) {
        this(transport, server, host, trust, template, count, parallel, perObject, manifest, qlogDir, MAX_DATA,
                MAX_STREAM_DATA);
    }

    /** ... with the receive windows it starts with (bytes per connection and per stream). */
    GetFiles(Transport transport, InetSocketAddress server, String host, X509TrustManager trust, String template,
             int count, int parallel, boolean perObject, Map<String, Entry> manifest, Path qlogDir, long maxData,
             long maxStreamData) {
        this.transport = transport;
        this.server = server;
        this.host = host;
        this.port = server.getPort();
        this.perObject = perObject;
        this.parallel = Math.min(parallel, count);
        this.manifest = manifest;
        this.qlogDir = qlogDir;
        reqs = new Req[count];
        for (int i = 0; i < count; i++) {
            reqs[i] = new Req(i + 1, template.replace("{i}", Integer.toString(i + 1)));
        }
        QuicSslContext ssl = QuicSslContextBuilder.forClient().trustManager(trust)
                .applicationProtocols(Transport.ALPN).build();
        codec = transport.apply(Http3.newQuicClientCodecBuilder())
                .sslContext(ssl)
                .sslEngineProvider(ch -> ssl.newEngine(ch.alloc(), host, port))
                .maxIdleTimeout(30, TimeUnit.SECONDS)
                .initialMaxData(maxData)
                .initialMaxStreamDataBidirectionalLocal(maxStreamData);
        loop = transport.group.next();
        allDone = new CountDownLatch(count);
    }

    static GetFiles fromArgs(Args a, Transport transport) throws Exception {
        InetSocketAddress server = Args.address("--connect", a.require("--connect"));
        String host = a.get("--host", server.getHostString());
        String policy = a.get("--connections", "shared");
        if (!policy.equals("shared") && !policy.equals("per-object")) {
            throw new Args.UsageException("--connections: invalid '" + policy + "' (accepted: shared, per-object)");
        }
        int count = (int) a.positive("--count", 1, 1_000_000);
        int parallel = (int) a.positive("--parallel", 1, 10_000);
        String template = a.require("--path-template");
        if (!template.startsWith("/")) {
            template = "/" + template;
        }
        String m = a.get("--manifest", null);
        String q = a.get("--qlog-dir", null);
        return new GetFiles(transport, server, host, LabTrust.of(a.require("--ca"), host), template, count, parallel,
                policy.equals("per-object"), m == null ? null : readManifest(Path.of(m)),
                q == null ? null : Files.createDirectories(Path.of(q)),
                a.positive("--max-data", MAX_DATA, 1L << 40), a.positive("--max-stream-data", MAX_STREAM_DATA, 1L << 40));
    }

    static Map<String, Entry> readManifest(Path p) {
        Map<String, Entry> out = new HashMap<>();
        try (Reader r = Files.newBufferedReader(p)) {
            for (JsonElement e : JsonParser.parseReader(r).getAsJsonObject().getAsJsonArray("files")) {
                JsonObject f = e.getAsJsonObject();
                String path = f.get("path").getAsString();
                out.put(path.startsWith("/") ? path.substring(1) : path,
                        new Entry(f.get("size").getAsLong(), f.get("sha256").getAsString().toLowerCase()));
            }
        } catch (IOException | RuntimeException e) {
            throw new Args.UsageException("--manifest: " + e.getMessage());
        }
        return out;
    }

    static int run(Args a) throws Exception {
        String requestsFile = a.get("--requests", null);
        double timeoutS = parseDuration(a.get("--timeout", "60s"));
        Transport transport = new Transport();
        try {
            GetFiles g = fromArgs(a, transport);
            String cert = a.get("--warmup-cert", null);
            int warmup = (int) a.integer("--warmup", Warmup.CONNECTIONS, 0, 1000);
            if (cert != null && warmup > 0) {
                // the JVM's cold path (class loading, the JIT) is paid here, outside the measured fetch
                Warmup.run(transport, new File(cert), new File(a.require("--warmup-key")), warmup);
            }
            String verifier = Verifier.INSTANCE.tid();
            ProcStats s0 = ProcStats.now(verifier);
            boolean finished = g.fetch(timeoutS);
            ProcStats s1 = ProcStats.now(verifier);
            JsonObject summary = g.summarize(s0, s1);
            if (requestsFile != null) {
                g.writeRequests(Path.of(requestsFile));
            }
            System.out.println(summary);
            return finished && summary.get("failed").getAsInt() == 0 ? 0 : 1;
        } finally {
            transport.close();
        }
    }

    static double parseDuration(String v) {
        String n = v.endsWith("ms") ? v.substring(0, v.length() - 2) : v.endsWith("s") ? v.substring(0, v.length() - 1) : v;
        try {
            double d = Double.parseDouble(n) / (v.endsWith("ms") ? 1000 : 1);
            if (d > 0 && Double.isFinite(d)) {
                return d;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        throw new Args.UsageException("--timeout: invalid '" + v + "' (accepted: seconds, e.g. 60s or 1.5)");
    }

    /** Fetch every object (false: the deadline struck first; those not done failed with it). */
    boolean fetch(double timeoutS) throws Exception {
        loop.execute(this::begin);
        boolean finished = allDone.await((long) (timeoutS * 1e9), TimeUnit.NANOSECONDS);
        loop.submit(() -> {
            stopping = true;
            for (Req r : reqs) {
                if (!r.done) {
                    finish(r, "timeout: no complete response within " + timeoutS + " s");
                }
            }
            for (Conn c : conns) {
                close(c);
            }
        }).sync();
        for (Conn c : conns) {
            if (c.udp != null) {
                c.udp.closeFuture().awaitUninterruptibly(1000);
            }
        }
        return finished;
    }

    /** The requests that failed, with why: "i: error" (empty: every one was fetched and verified). */
    List<String> failures() {
        List<String> out = new ArrayList<>();
        for (Req r : reqs) {
            if (r.error != null) {
                out.add(r.i + ": " + r.error);
            }
        }
        return out;
    }

    // -- on the event loop ------------------------------------------------------------

    private void begin() {
        for (int k = 0; k < parallel; k++) {
            startNext();
        }
    }

    /** Start the next request: on the shared connection (opened by the first), or on one of its own. */
    private void startNext() {
        if (stopping || next >= reqs.length) {
            return;
        }
        Req r = reqs[next++];
        r.startNs = Clock.nowNs();
        Conn on;
        if (perObject) {
            on = open();
        } else {
            if (shared == null) {
                shared = open();
            }
            on = shared;
        }
        r.conn = on;
        r.reused = on.assigned++ > 0;
        if (on.error != null) {
            finish(r, on.error);
        } else if (on.quic != null) {
            request(on, r);
        } else {
            on.waiting.add(r);
        }
    }

    private Conn open() {
        Conn c = new Conn(conns.size() + 1);
        conns.add(c);
        transport.bootstrap().handler(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                ch.pipeline().addLast(codec.build(), new QuietAfterClose());
            }
        }).bind(0).addListener(bound -> {
            if (!bound.isSuccess()) {
                fail(c, "binding a UDP socket: " + bound.cause());
                return;
            }
            c.udp = ((io.netty.channel.ChannelFuture) bound).channel();
            QuicChannelBootstrap qb = QuicChannel.newBootstrap(c.udp)
                    .handler(new Http3ClientConnectionHandler())
                    .remoteAddress(server);
            if (qlogDir != null) {
                qb.option(QuicChannelOption.QLOG, new QLogConfiguration(qlogDir.toString(), "quicbench-netty client",
                        "connection " + c.id));
            }
            qb.connect().addListener(done -> {
                if (!done.isSuccess()) {
                    fail(c, "QUIC handshake: " + done.cause());
                    c.udp.close();
                    return;
                }
                c.connectDoneNs = Clock.nowNs();
                c.quic = (QuicChannel) done.getNow();
                c.alpn = c.quic.sslEngine().getApplicationProtocol();
                c.quic.closeFuture().addListener(closed -> fail(c, "the connection closed before the response ended"));
                for (Req r : List.copyOf(c.waiting)) {
                    request(c, r);
                }
                c.waiting.clear();
            });
        });
        return c;
    }

    /** Drops what a socket's reader reports once its connection is being closed. */
    static final class QuietAfterClose extends ChannelInboundHandlerAdapter {
        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (!(cause instanceof ClosedChannelException) && ctx.channel().isOpen()) {
                ctx.fireExceptionCaught(cause);
            }
        }
    }

    /** Every request of c not yet done fails with why; later ones too. */
    private void fail(Conn c, String why) {
        if (c.error == null) {
            c.error = why;
        }
        for (Req r : List.copyOf(c.waiting)) {
            finish(r, why);
        }
        c.waiting.clear();
        for (Req r : List.copyOf(c.inFlight)) {
            if (!r.ended) {         // a complete response waits for its digest only
                finish(r, why);
            }
        }
    }

    private void request(Conn c, Req r) {
        c.inFlight.add(r);
        Http3.newRequestStream(c.quic, new Response(r)).addListener(f -> {
            if (!f.isSuccess()) {
                finish(r, "opening a request stream: " + f.cause());
                return;
            }
            QuicStreamChannel s = (QuicStreamChannel) f.getNow();
            Http3HeadersFrame h = new DefaultHttp3HeadersFrame();
            h.headers().method("GET").path(r.path).scheme("https")
                    .authority(port == 443 ? host : host + ":" + port).add("user-agent", USER_AGENT);
            s.writeAndFlush(h).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        });
    }

    private void finish(Req r, String error) {
        if (r.done) {
            return;
        }
        r.done = true;
        r.error = error;
        r.endNs = Clock.nowNs();
        Conn c = r.conn;
        if (c != null) {
            c.inFlight.remove(r);
        }
        allDone.countDown();
        if (perObject && c != null) {
            close(c);
        }
        startNext();
    }

    private static void close(Conn c) {
        if (c.quic != null && c.quic.isOpen()) {
            // H3_NO_ERROR (0x100): the client is done with the connection
            c.quic.close(true, 0x100, io.netty.buffer.Unpooled.EMPTY_BUFFER)
                    .addListener(x -> c.udp.close());
        } else if (c.udp != null) {
            c.udp.close();
        }
    }

    /** What is wrong with a complete response (qb-load's checks, in its order), null if nothing. */
    private String verify(Req r) {
        String alpn = r.conn.alpn;
        if (perObject && r.reused) {
            return "connection reused under per-object policy";
        }
        if (!"h3".equals(alpn)) {
            return "protocol mismatch: requested h3, got " + alpn;
        }
        if (r.status == null || r.status != 200) {
            return "status " + r.status;
        }
        if (r.contentLength >= 0 && r.bytes != r.contentLength) {
            return "short body: got " + r.bytes + " of " + r.contentLength + " bytes";
        }
        if (manifest != null) {
            Entry e = manifest.get(r.path.substring(1));
            if (e == null) {
                return "manifest: no entry for \"" + r.path.substring(1) + "\"";
            }
            if (r.bytes != e.size()) {
                return "manifest: size mismatch: got " + r.bytes + " bytes, want " + e.size();
            }
            if (!sha256Ok(r)) {
                return "manifest: sha256 mismatch";
            }
        }
        return null;
    }

    private boolean sha256Ok(Req r) {
        Entry e = manifest == null ? null : manifest.get(r.path.substring(1));
        return e != null && r.digest != null && r.digest.equals(e.sha256());
    }

    /** A request stream's response: headers, then DATA frames, then the stream's end. */
    final class Response extends Http3RequestStreamInboundHandler {
        private final Req r;

        Response(Req r) {
            this.r = r;
        }

        @Override
        protected void channelRead(ChannelHandlerContext ctx, Http3HeadersFrame frame) {
            try {
                if (r.firstByteNs == null) {
                    // as qb-load's h3: the moment the response headers are decoded
                    r.firstByteNs = Clock.nowNs();
                    r.lastData = r.firstByteNs;
                    r.proto = r.conn.alpn;
                    CharSequence st = frame.headers().status();
                    try {
                        r.status = st == null ? null : Integer.valueOf(st.toString());
                        CharSequence len = frame.headers().get("content-length");
                        r.contentLength = len == null ? -1 : Long.parseLong(len.toString());
                    } catch (NumberFormatException e) {
                        r.contentLength = -1;
                    }
                }
            } finally {
                ReferenceCountUtil.release(frame);
            }
        }

        @Override
        protected void channelRead(ChannelHandlerContext ctx, Http3DataFrame frame) {
            try {
                ByteBuf b = frame.content();
                int n = b.readableBytes();
                if (n == 0) {
                    return;
                }
                long now = Clock.nowNs();
                long gap = now - r.lastData;
                r.stallNs = Math.max(r.stallNs, gap);
                if (gap >= MIN_GAP_NS) {
                    if (r.gaps.size() < MAX_GAPS) {
                        r.gaps.add(new long[] {r.lastData, now});
                    } else {
                        r.gapsTruncated = true;
                    }
                }
                r.lastData = now;
                r.bytes += n;
                ByteBuf body = b.retain();
                Verifier.INSTANCE.execute(() -> {
                    try {
                        for (ByteBuffer bb : body.nioBuffers()) {
                            r.sha.update(bb);
                        }
                    } finally {
                        body.release();
                    }
                });
            } finally {
                ReferenceCountUtil.release(frame);
            }
        }

        @Override
        protected void channelInputClosed(ChannelHandlerContext ctx) {
            if (r.firstByteNs == null) {
                finish(r, "the stream ended without a response");
            } else {
                r.lastByteNs = Clock.nowNs();
                r.ended = true;
                // once the verifier has hashed the body's last bytes
                Verifier.INSTANCE.execute(() -> {
                    String digest = HexFormat.of().formatHex(r.sha.digest());
                    loop.execute(() -> {
                        r.digest = digest;
                        finish(r, verify(r));
                    });
                });
            }
            ctx.close();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            finish(r, "reading the response: " + cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            if (!r.ended) {
                finish(r, "the stream closed before the response ended");
            }
            super.channelInactive(ctx);
        }
    }

    // -- output ---------------------------------------------------------------------

    JsonObject summarize(ProcStats s0, ProcStats s1) {
        JsonObject s = new JsonObject();
        Map<String, Integer> protos = new TreeMap<>();
        long bytes = 0;
        long start = Long.MAX_VALUE;
        long end = 0;
        int ok = 0;
        JsonArray errors = new JsonArray();
        for (Req r : reqs) {
            if (r.proto != null) {
                protos.merge(r.proto, 1, Integer::sum);
            }
            bytes += r.bytes;
            if (r.error == null) {
                ok++;
            } else if (errors.size() < MAX_ERRORS) {
                JsonObject e = new JsonObject();
                e.addProperty("i", r.i);
                e.addProperty("error", r.error);
                errors.add(e);
            }
            if (r.startNs != null) {
                start = Math.min(start, r.startNs);
            }
            end = Math.max(end, r.endNs);
        }
        s.addProperty("proto_requested", "h3");
        s.addProperty("connection_policy", perObject ? "per-object" : "shared");
        JsonObject pn = new JsonObject();
        protos.forEach(pn::addProperty);
        s.add("protos_negotiated", pn);
        s.addProperty("requests", reqs.length);
        s.addProperty("ok", ok);
        s.addProperty("failed", reqs.length - ok);
        s.addProperty("bytes", bytes);
        boolean timed = start != Long.MAX_VALUE && end >= start;
        double dur = timed ? (end - start) / 1e9 : 0;
        s.addProperty("start_ns", timed ? start : null);
        s.addProperty("end_ns", timed ? end : null);
        s.addProperty("duration_s", dur);
        s.addProperty("goodput_mbps", dur > 0 ? bytes * 8 / dur / 1e6 : 0);
        s.addProperty("connections", conns.size());
        s.add("errors", errors);
        s.addProperty("cpu_user_s", Math.max(0, s1.userS - s0.userS));
        s.addProperty("cpu_sys_s", Math.max(0, s1.sysS - s0.sysS));
        s.addProperty("cpu_verify_s", Math.max(0, s1.excludedS - s0.excludedS));
        boolean waitKnown = !Double.isNaN(s0.waitS) && !Double.isNaN(s1.waitS);
        s.addProperty("cpu_wait_s", waitKnown ? Math.max(0, s1.waitS - s0.waitS) : null);
        s.addProperty("cpu_slices", waitKnown ? Math.max(0, s1.slices - s0.slices) : null);
        s.add("versions", Versions.object());
        return s;
    }

    void writeRequests(Path file) throws IOException {
        Gson gson = new GsonBuilder().serializeNulls().disableHtmlEscaping().create();
        try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            for (Req r : reqs) {
                JsonObject o = new JsonObject();
                boolean first = r.conn != null && !r.reused;
                o.addProperty("i", r.i);
                o.addProperty("path", r.path);
                o.addProperty("start_ns", r.startNs);
                o.addProperty("connect_start_ns", first ? r.conn.connectStartNs : null);
                o.addProperty("connect_done_ns", first ? r.conn.connectDoneNs : null);
                o.addProperty("tls_done_ns", first ? r.conn.connectDoneNs : null);
                o.addProperty("first_byte_ns", r.firstByteNs);
                o.addProperty("last_byte_ns", r.lastByteNs);
                o.addProperty("bytes", r.bytes);
                o.addProperty("status", r.status);
                o.addProperty("proto", r.proto);
                o.addProperty("conn_id", r.conn == null ? null : r.conn.id);
                o.addProperty("conn_reused", r.conn == null ? null : r.reused);
                o.addProperty("sha256_ok", manifest == null || r.digest == null ? null : sha256Ok(r));
                o.addProperty("error", r.error);
                o.addProperty("stall_ns", r.lastByteNs == null ? null : r.stallNs);
                if (r.lastByteNs != null && !r.gaps.isEmpty()) {
                    JsonArray g = new JsonArray();
                    for (long[] p : r.gaps) {
                        JsonArray pair = new JsonArray();
                        pair.add(p[0]);
                        pair.add(p[1]);
                        g.add(pair);
                    }
                    o.add("gaps_ns", g);
                }
                if (r.gapsTruncated) {
                    o.addProperty("gaps_truncated", true);
                }
                w.write(gson.toJson(o));
                w.write('\n');
            }
        }
    }
}
