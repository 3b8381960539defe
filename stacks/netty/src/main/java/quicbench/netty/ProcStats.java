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

    private ProcStats(double userS, double sysS, double waitS, long slices) {
        this.userS = userS;
        this.sysS = sysS;
        this.waitS = waitS;
        this.slices = slices;
    }

    static ProcStats now() {
        double user = 0;
        double sys = 0;
        try {
            String stat = Files.readString(Path.of("/proc/self/stat"));
            // fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            user = Long.parseLong(f[11]) * TICK_S;
            sys = Long.parseLong(f[12]) * TICK_S;
        } catch (IOException | RuntimeException ignored) {
            // left at 0
        }
        long waitNs = 0;
        long slices = 0;
        boolean ok = false;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path t : tasks) {
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
        return new ProcStats(user, sys, ok ? waitNs / 1e9 : Double.NaN, slices);
    }
}
