package quicbench.netty;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Which file a request path names. Served: regular files under the root and a directory's
 * index.html, never a listing. A symbolic link under the root is followed only if it resolves
 * inside the root or one of the allowed directories (quicbench's live/KEY links to its live
 * publishers); a ".." segment is refused before the file system is asked.
 */
final class ContentRoot {
    enum Kind { FILE, NOT_FOUND, FORBIDDEN, BAD_REQUEST }

    record Lookup(Kind kind, Path file) {
        static Lookup of(Kind k) {
            return new Lookup(k, null);
        }
    }

    private final Path root;
    private final List<Path> allowed;

    ContentRoot(Path root, List<Path> allow) throws IOException {
        try {
            this.root = root.toRealPath();
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IOException("no such directory: " + root);
        }
        if (!Files.isDirectory(this.root)) {
            throw new IOException(root + " is not a directory");
        }
        this.allowed = new ArrayList<>();
        for (Path a : allow) {
            allowed.add(a.toAbsolutePath().normalize());
        }
    }

    private boolean inside(Path p) {
        if (p.startsWith(root)) {
            return true;
        }
        for (Path a : allowed) {
            try {
                if (p.startsWith(a.toRealPath())) {
                    return true;
                }
            } catch (IOException ignored) {
                // an allowed directory that does not exist (yet)
            }
        }
        return false;
    }

    Lookup lookup(String uriPath) {
        int q = uriPath.indexOf('?');
        if (q >= 0) {
            uriPath = uriPath.substring(0, q);
        }
        if (!uriPath.startsWith("/")) {
            return Lookup.of(Kind.BAD_REQUEST);
        }
        String decoded;
        try {
            decoded = new URI("http://x" + uriPath).getPath();
        } catch (URISyntaxException e) {
            return Lookup.of(Kind.BAD_REQUEST);
        }
        if (decoded == null || decoded.indexOf('\0') >= 0) {
            return Lookup.of(Kind.BAD_REQUEST);
        }
        Path rel = Path.of("");
        for (String seg : decoded.split("/")) {
            if (seg.isEmpty() || seg.equals(".")) {
                continue;
            }
            if (seg.equals("..")) {
                return Lookup.of(Kind.FORBIDDEN);
            }
            rel = rel.resolve(seg);
        }
        Path real;
        try {
            real = root.resolve(rel).toRealPath();
        } catch (IOException | java.nio.file.InvalidPathException e) {
            return Lookup.of(Kind.NOT_FOUND);
        }
        if (!inside(real)) {
            return Lookup.of(Kind.FORBIDDEN);
        }
        if (Files.isDirectory(real)) {
            try {
                Path index = real.resolve("index.html").toRealPath();
                if (!inside(index)) {
                    return Lookup.of(Kind.FORBIDDEN);
                }
                return Files.isRegularFile(index) ? new Lookup(Kind.FILE, index) : Lookup.of(Kind.NOT_FOUND);
            } catch (IOException e) {
                return Lookup.of(Kind.NOT_FOUND);
            }
        }
        return Files.isRegularFile(real) ? new Lookup(Kind.FILE, real) : Lookup.of(Kind.NOT_FOUND);
    }

    /** Content-Type by extension (what the lab's pages, players and objects use); else octet-stream. */
    static String contentType(Path p) {
        String name = p.getFileName().toString();
        int dot = name.lastIndexOf('.');
        String ext = dot < 0 ? "" : name.substring(dot + 1).toLowerCase(Locale.ROOT);
        return switch (ext) {
            case "html", "htm" -> "text/html; charset=utf-8";
            case "js", "mjs" -> "text/javascript";
            case "css" -> "text/css";
            case "json" -> "application/json";
            case "txt" -> "text/plain; charset=utf-8";
            case "svg" -> "image/svg+xml";
            case "png" -> "image/png";
            case "jpg", "jpeg" -> "image/jpeg";
            case "webp" -> "image/webp";
            case "m3u8" -> "application/vnd.apple.mpegurl";
            case "mpd" -> "application/dash+xml";
            case "mp4", "m4s", "m4v" -> "video/mp4";
            case "m4a" -> "audio/mp4";
            case "ts" -> "video/mp2t";
            case "webm" -> "video/webm";
            default -> "application/octet-stream";
        };
    }
}
