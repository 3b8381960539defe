package quicbench.netty;

import java.util.Arrays;

/** quicbench-netty: {@code server ...}, {@code client ...} or {@code --version}. */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) {
        int code;
        try {
            if (args.length == 1 && args[0].equals("--version")) {
                System.out.println(Versions.json());
                code = 0;
            } else if (args.length >= 1 && args[0].equals("server")) {
                code = FileServer.run(Args.parse(Arrays.copyOfRange(args, 1, args.length), FileServer.OPTIONS));
            } else if (args.length >= 1 && args[0].equals("client")) {
                code = GetFiles.run(Args.parse(Arrays.copyOfRange(args, 1, args.length), GetFiles.OPTIONS));
            } else {
                throw new Args.UsageException("usage: quicbench-netty server|client OPTIONS..., or --version");
            }
        } catch (Args.UsageException e) {
            System.err.println("quicbench-netty: " + e.getMessage());
            code = 2;
        } catch (Exception e) {
            System.err.println("quicbench-netty: " + e);
            code = 1;
        }
        System.out.flush();
        // the JVM exits now: Netty's event loop threads would keep it up
        Runtime.getRuntime().halt(code);
    }
}
