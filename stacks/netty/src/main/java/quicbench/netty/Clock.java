package quicbench.netty;

/** Wall-clock nanoseconds since the epoch, advanced by the monotonic clock (as Go's time.Now). */
final class Clock {
    private static final long WALL0 = System.currentTimeMillis() * 1_000_000L;
    private static final long MONO0 = System.nanoTime();

    private Clock() {
    }

    static long nowNs() {
        return WALL0 + (System.nanoTime() - MONO0);
    }
}
