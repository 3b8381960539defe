package quicbench.netty;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.handler.codec.http3.DefaultHttp3DataFrame;
import io.netty.handler.codec.http3.DefaultHttp3HeadersFrame;
import io.netty.handler.codec.http3.Http3;
import io.netty.handler.codec.http3.Http3DataFrame;
import io.netty.handler.codec.http3.Http3Headers;
import io.netty.handler.codec.http3.Http3HeadersFrame;
import io.netty.handler.codec.http3.Http3RequestStreamInboundHandler;
import io.netty.handler.codec.http3.Http3ServerConnectionHandler;
import io.netty.handler.codec.quic.QLogConfiguration;
import io.netty.handler.codec.quic.QuicChannel;
import io.netty.handler.codec.quic.QuicChannelOption;
import io.netty.handler.codec.quic.QuicCongestionControlAlgorithm;
import io.netty.handler.codec.quic.QuicServerCodecBuilder;
import io.netty.handler.codec.quic.QuicSslContext;
import io.netty.handler.codec.quic.QuicSslContextBuilder;
import io.netty.handler.codec.quic.QuicStreamChannel;
import io.netty.handler.codec.quic.SegmentedDatagramPacketAllocator;
import io.netty.handler.stream.ChunkedInput;
import io.netty.handler.stream.ChunkedNioFile;
import io.netty.handler.stream.ChunkedWriteHandler;
import io.netty.util.ReferenceCountUtil;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * An HTTP/3 file server: GET and HEAD of the files under --root, on Netty's HTTP/3 codec over its
 * QUIC codec (quiche). The congestion controller is quiche's (--cc). No Retry (no address
 * validation token), as the lab's other servers; each response carries quicbench's no-cache headers.
 */
final class FileServer {
    static final Set<String> OPTIONS = Set.of("--listen", "--cert", "--key", "--root", "--allow-dir", "--cc",
            "--qlog-dir", "--warmup");
    // the server's receive windows (it receives requests only) and stream limit (requests at once)
    static final long MAX_DATA = 16L << 20;
    static final long MAX_STREAM_DATA = 1L << 20;
    static final long MAX_STREAMS = 1000;
    static final int CHUNK = 64 << 10;      // bytes per DATA frame read from the file

    private FileServer() {
    }

    static int run(Args a) throws Exception {
        InetSocketAddress listen = Args.address("--listen", a.require("--listen"));
        File cert = new File(a.require("--cert"));
        File key = new File(a.require("--key"));
        String ccName = a.get("--cc", "cubic");
        Transport.congestionControl(ccName);      // a bad name stops the start
        List<Path> allow = new ArrayList<>();
        for (String d : a.all("--allow-dir")) {
            allow.add(Path.of(d));
        }
        ContentRoot root;
        try {
            root = new ContentRoot(Path.of(a.require("--root")), allow);
        } catch (IOException e) {
            throw new Args.UsageException("--root: " + e.getMessage());
        }
        for (File f : new File[] {cert, key}) {
            if (!f.canRead()) {
                throw new Args.UsageException("cannot read " + f);
            }
        }
        String qlogDir = a.get("--qlog-dir", null);
        if (qlogDir != null) {
            Files.createDirectories(Path.of(qlogDir));
        }
        Transport transport = new Transport();
        int warmup = (int) a.integer("--warmup", Warmup.CONNECTIONS, 0, 1000);
        if (warmup > 0) {
            // the JVM's cold path (class loading, the JIT) is paid here, before the listener opens
            Warmup.run(transport, cert, key, warmup);
        }
        ChannelHandler codec = codec(transport, cert, key, root, ccName, qlogDir);
        Channel channel = transport.bootstrap().handler(codec).bind(listen).sync().channel();
        System.out.println("quicbench-netty server on " + listen + " (" + Versions.json() + ", " + transport.describe()
                + ", congestion control " + ccName + ")");
        System.out.flush();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            channel.close().awaitUninterruptibly(1000);
            transport.close();
        }));
        channel.closeFuture().sync();
        return 0;
    }

    /** The server's QUIC codec: HTTP/3 over quiche with congestion controller ccName, qlogs into qlogDir (null: none). */
    static ChannelHandler codec(Transport transport, File cert, File key, ContentRoot root, String ccName,
                                String qlogDir) {
        QuicSslContext ssl = QuicSslContextBuilder.forServer(key, null, cert)
                .applicationProtocols(Transport.ALPN).build();
        QuicServerCodecBuilder builder = transport.apply(Http3.newQuicServerCodecBuilder())
                .sslContext(ssl)
                .maxIdleTimeout(30, TimeUnit.SECONDS)
                .initialMaxData(MAX_DATA)
                .initialMaxStreamDataBidirectionalRemote(MAX_STREAM_DATA)
                .initialMaxStreamsBidirectional(MAX_STREAMS)
                .congestionControlAlgorithm(Transport.congestionControl(ccName))
                .tokenHandler(null);    // none: no Retry, as the lab's other servers
        if (qlogDir != null) {
            // a directory: quiche writes one file per connection, <trace id>-<channel id>.qlog
            builder.option(QuicChannelOption.QLOG, new QLogConfiguration(qlogDir, "quicbench-netty server",
                    "congestion control " + ccName));
        }
        if (transport.gso) {
            builder.option(QuicChannelOption.SEGMENTED_DATAGRAM_PACKET_ALLOCATOR,
                    (SegmentedDatagramPacketAllocator) Transport.gsoAllocator());
        }
        return builder.handler(new ChannelInitializer<QuicChannel>() {
            @Override
            protected void initChannel(QuicChannel ch) {
                ch.pipeline().addLast(new Http3ServerConnectionHandler(new ChannelInitializer<QuicStreamChannel>() {
                    @Override
                    protected void initChannel(QuicStreamChannel s) {
                        s.pipeline().addLast(new ChunkedWriteHandler(), new RequestHandler(root));
                    }
                }));
            }
        }).build();
    }

    /** One request stream: answers its request when the headers are in. */
    static final class RequestHandler extends Http3RequestStreamInboundHandler {
        private final ContentRoot root;
        private boolean answered;

        RequestHandler(ContentRoot root) {
            this.root = root;
        }

        @Override
        protected void channelRead(ChannelHandlerContext ctx, Http3HeadersFrame frame) {
            try {
                if (!answered) {
                    answered = true;
                    answer(ctx, frame.headers());
                }
            } finally {
                ReferenceCountUtil.release(frame);
            }
        }

        @Override
        protected void channelRead(ChannelHandlerContext ctx, Http3DataFrame frame) {
            ReferenceCountUtil.release(frame);       // a GET has no body
        }

        @Override
        protected void channelInputClosed(ChannelHandlerContext ctx) {
            // the request is complete; the answer was started with its headers
        }

        private void answer(ChannelHandlerContext ctx, Http3Headers req) {
            CharSequence method = req.method();
            CharSequence path = req.path();
            boolean head = method != null && method.toString().equals("HEAD");
            if (method == null || !(head || method.toString().equals("GET"))) {
                error(ctx, 405, "method not allowed\n");
                return;
            }
            ContentRoot.Lookup found = root.lookup(path == null ? "" : path.toString());
            switch (found.kind()) {
                case BAD_REQUEST -> error(ctx, 400, "bad request\n");
                case FORBIDDEN -> error(ctx, 403, "forbidden\n");
                case NOT_FOUND -> error(ctx, 404, "not found\n");
                default -> serve(ctx, found.file(), head);
            }
        }

        private void serve(ChannelHandlerContext ctx, Path file, boolean head) {
            FileChannel fc;
            long size;
            try {
                fc = FileChannel.open(file, StandardOpenOption.READ);
                size = fc.size();
            } catch (IOException e) {
                error(ctx, 404, "not found\n");
                return;
            }
            Http3HeadersFrame h = headers(200, ContentRoot.contentType(file), size);
            if (head) {
                closeQuietly(fc);
                ctx.writeAndFlush(h).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
                return;
            }
            ctx.write(h);
            try {
                ctx.writeAndFlush(new ChunkedHttp3File(new ChunkedNioFile(fc, 0, size, CHUNK)))
                        .addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
            } catch (IOException e) {
                closeQuietly(fc);
                ctx.close();
            }
        }

        private static void error(ChannelHandlerContext ctx, int status, String body) {
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            ctx.write(headers(status, "text/plain; charset=utf-8", b.length));
            ctx.writeAndFlush(new DefaultHttp3DataFrame(Unpooled.wrappedBuffer(b)))
                    .addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        }

        private static Http3HeadersFrame headers(int status, String type, long length) {
            Http3HeadersFrame f = new DefaultHttp3HeadersFrame();
            f.headers().status(Integer.toString(status))
                    .add("content-type", type)
                    .add("content-length", Long.toString(length))
                    // as Go-Quick's Apache: every response fetched anew
                    .add("cache-control", "no-cache, no-store, must-revalidate")
                    .add("pragma", "no-cache")
                    .add("expires", "0");
            return f;
        }

        private static void closeQuietly(FileChannel fc) {
            try {
                fc.close();
            } catch (IOException ignored) {
                // nothing to do
            }
        }
    }

    /** A file as DATA frames for ChunkedWriteHandler, which writes them as the stream has room. */
    static final class ChunkedHttp3File implements ChunkedInput<Http3DataFrame> {
        private final ChunkedNioFile file;

        ChunkedHttp3File(ChunkedNioFile file) {
            this.file = file;
        }

        @Override
        public boolean isEndOfInput() throws Exception {
            return file.isEndOfInput();
        }

        @Override
        public void close() throws Exception {
            file.close();
        }

        @Deprecated
        @Override
        public Http3DataFrame readChunk(ChannelHandlerContext ctx) throws Exception {
            return readChunk(ctx.alloc());
        }

        @Override
        public Http3DataFrame readChunk(ByteBufAllocator alloc) throws Exception {
            var buf = file.readChunk(alloc);
            return buf == null ? null : new DefaultHttp3DataFrame(buf);
        }

        @Override
        public long length() {
            return file.length();
        }

        @Override
        public long progress() {
            return file.progress();
        }
    }
}
