package quicbench.netty;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The thread that hashes the bodies, apart from the transfer's: its CPU is the client's check of
 * what it received, not its stack's work, and ProcStats leaves it out (as the ngtcp2 client's
 * bodies are checked by quicbench after it, and Java's SHA-256 costs several times Go's).
 */
final class Verifier {
    static final Verifier INSTANCE = new Verifier();

    private final ExecutorService exec = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "quicbench-verify");
        t.setDaemon(true);
        return t;
    });
    private String tid;             // the kernel's id of the thread, once asked; null: not known
    private boolean asked;

    private Verifier() {
    }

    void execute(Runnable task) {
        exec.execute(task);
    }

    /** Asked of the thread itself (never while this class is being initialised: a lambda of it runs there). */
    synchronized String tid() {
        if (!asked) {
            asked = true;
            try {
                tid = exec.submit(() -> Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString())
                        .get();
            } catch (Exception e) {
                tid = null;
            }
        }
        return tid;
    }
}
