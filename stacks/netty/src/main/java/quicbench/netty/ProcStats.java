package quicbench.netty;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/** This process's CPU time (/proc/self/stat) and run-queue wait (/proc/self/task/{@literal *}/schedstat). */
final class ProcStats {
    private static final double TICK_S = 0.01;    // USER_HZ: 100 on Linux

    final double userS;
    final double sysS;
    final double waitS;       // NaN: the kernel does not say
    final long slices;
    final double excludedS;   // the CPU of the thread left out

    private ProcStats(double userS, double sysS, double waitS, long slices, double excludedS) {
        this.userS = userS;
        this.sysS = sysS;
        this.waitS = waitS;
        this.slices = slices;
        this.excludedS = excludedS;
    }

    /** utime and stime of a /proc stat file, in seconds; {0, 0} if it cannot be read. */
    private static double[] times(Path stat) {
        try {
            String s = Files.readString(stat);
            // fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            return new double[] {Long.parseLong(f[11]) * TICK_S, Long.parseLong(f[12]) * TICK_S};
        } catch (IOException | RuntimeException e) {
            return new double[] {0, 0};
        }
    }

    /** The process's figures, less those of the thread excludeTid (null: none). */
    static ProcStats now(String excludeTid) {
        double[] proc = times(Path.of("/proc/self/stat"));
        double[] ex = excludeTid == null ? new double[] {0, 0} : times(Path.of("/proc/self/task", excludeTid, "stat"));
        double user = proc[0] - ex[0];
        double sys = proc[1] - ex[1];
        long waitNs = 0;
        long slices = 0;
        boolean ok = false;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path t : tasks) {
                if (t.getFileName().toString().equals(excludeTid)) {
                    continue;
                }
                try {
                    String[] f = Files.readString(t.resolve("schedstat")).trim().split("\\s+");
                    if (f.length >= 3) {
                        waitNs += Long.parseLong(f[1]);
                        slices += Long.parseLong(f[2]);
                        ok = true;
                    }
                } catch (IOException | RuntimeException ignored) {
                    // a thread that ended meanwhile
                }
            }
        } catch (IOException ignored) {
            // no schedstat
        }
        return new ProcStats(user, sys, ok ? waitNs / 1e9 : Double.NaN, slices, ex[0] + ex[1]);
    }
}
