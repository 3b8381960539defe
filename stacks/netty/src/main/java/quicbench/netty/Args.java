package quicbench.netty;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** {@code --name value} options (a name may repeat); a flag without value is given as "true". */
final class Args {
    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private final Map<String, List<String>> values = new HashMap<>();

    /** known: option names; one ending in '!' is a flag (no value). */
    static Args parse(String[] argv, Set<String> known) {
        Args a = new Args();
        for (int i = 0; i < argv.length; i++) {
            String name = argv[i];
            if (known.contains(name + "!")) {
                a.values.computeIfAbsent(name, k -> new ArrayList<>()).add("true");
                continue;
            }
            if (!known.contains(name)) {
                throw new UsageException("unknown option '" + name + "' (accepted: " + String.join(", ",
                        known.stream().map(k -> k.replace("!", "")).sorted().toList()) + ")");
            }
            if (i + 1 >= argv.length) {
                throw new UsageException(name + ": a value is missing");
            }
            a.values.computeIfAbsent(name, k -> new ArrayList<>()).add(argv[++i]);
        }
        return a;
    }

    String get(String name, String dflt) {
        List<String> v = values.get(name);
        return v == null ? dflt : v.get(v.size() - 1);
    }

    String require(String name) {
        String v = get(name, null);
        if (v == null) {
            throw new UsageException(name + " is required");
        }
        return v;
    }

    List<String> all(String name) {
        return values.getOrDefault(name, List.of());
    }

    boolean flag(String name) {
        return values.containsKey(name);
    }

    long positive(String name, long dflt, long max) {
        return integer(name, dflt, 1, max);
    }

    long integer(String name, long dflt, long min, long max) {
        String v = get(name, null);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v);
            if (n >= min && n <= max) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        throw new UsageException(name + ": invalid '" + v + "' (accepted: an integer from " + min + " to " + max + ")");
    }

    /** HOST:PORT or [IPv6]:PORT. */
    static java.net.InetSocketAddress address(String name, String v) {
        int colon = v.lastIndexOf(':');
        if (colon > 0) {
            String host = v.substring(0, colon);
            if (host.startsWith("[") && host.endsWith("]")) {
                host = host.substring(1, host.length() - 1);
            }
            try {
                int port = Integer.parseInt(v.substring(colon + 1));
                if (port >= 0 && port <= 65535) {
                    return new java.net.InetSocketAddress(host, port);
                }
            } catch (NumberFormatException ignored) {
                // reported below
            }
        }
        throw new UsageException(name + ": invalid '" + v + "' (accepted: ADDRESS:PORT, [IPv6]:PORT)");
    }
}
