package quicbench.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.handler.codec.quic.EpollQuicUtils;
import io.netty.handler.codec.quic.QuicCodecBuilder;
import io.netty.handler.codec.quic.QuicCongestionControlAlgorithm;

import java.util.Locale;

/** The UDP transport both ends share: one event loop thread, epoll with UDP GSO where the kernel has it. */
final class Transport {
    // the largest UDP payload quiche is asked to send and accept: what fits a 1500-byte MTU path
    static final int UDP_PAYLOAD = 1350;
    static final int GSO_SEGMENTS = 16;
    static final int SOCKET_BUFFER = 7 << 20;
    static final String CCS = "cubic, reno, bbr";
    // HTTP/3 as RFC 9114 names it (Netty also offers the drafts' h3-29..h3-32: not here)
    static final String ALPN = "h3";

    final EventLoopGroup group;
    final boolean epoll;
    final boolean gso;

    Transport() {
        epoll = Epoll.isAvailable();
        gso = epoll && EpollDatagramChannel.isSegmentedDatagramPacketSupported();
        group = new MultiThreadIoEventLoopGroup(1, epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
    }

    Bootstrap bootstrap() {
        // socket buffers: quic-go's 7 MiB, which the kernel caps at net.core.rmem_max / wmem_max
        // (Netty has no SO_RCVBUFFORCE); the default (about 200 KiB) overflowed under load
        return new Bootstrap().group(group).channel(epoll ? EpollDatagramChannel.class : NioDatagramChannel.class)
                .option(ChannelOption.SO_RCVBUF, SOCKET_BUFFER).option(ChannelOption.SO_SNDBUF, SOCKET_BUFFER);
    }

    /** The settings of a codec that only depend on the transport: payload size and GSO. */
    <B extends QuicCodecBuilder<B>> B apply(B builder) {
        builder.maxSendUdpPayloadSize(UDP_PAYLOAD).maxRecvUdpPayloadSize(UDP_PAYLOAD);
        return builder;
    }

    String describe() {
        return (epoll ? "epoll" : "nio") + (gso ? "+gso" : "");
    }

    static Object gsoAllocator() {
        return EpollQuicUtils.newSegmentedAllocator(GSO_SEGMENTS);
    }

    static QuicCongestionControlAlgorithm congestionControl(String name) {
        switch (name.toLowerCase(Locale.ROOT)) {
            case "cubic":
                return QuicCongestionControlAlgorithm.CUBIC;
            case "reno":
                return QuicCongestionControlAlgorithm.RENO;
            case "bbr":
                return QuicCongestionControlAlgorithm.BBR;
            default:
                throw new Args.UsageException("--cc: invalid '" + name + "' (accepted: " + CCS + ")");
        }
    }

    void close() {
        group.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS).awaitUninterruptibly(2000);
    }
}
