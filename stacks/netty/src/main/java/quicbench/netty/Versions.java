package quicbench.netty;

import com.google.gson.JsonObject;
import io.netty.handler.codec.quic.Quic;
import io.netty.util.Version;

import java.lang.reflect.Method;

/** This program's, Netty's, quiche's and the JVM's versions. */
final class Versions {
    static final String SELF = "0.1.0";

    private Versions() {
    }

    static String netty() {
        Version v = Version.identify().get("netty-codec-classes-quic");
        return v == null ? "unknown" : v.artifactVersion();
    }

    /** The quiche library inside Netty's native: its own quiche_version() (package-private in Netty). */
    static String quiche() {
        try {
            Quic.ensureAvailability();
            Class<?> c = Class.forName("io.netty.handler.codec.quic.Quiche");
            Method m = c.getDeclaredMethod("quiche_version");
            m.setAccessible(true);
            return String.valueOf(m.invoke(null));
        } catch (ReflectiveOperationException | RuntimeException | UnsatisfiedLinkError e) {
            return "unknown";
        }
    }

    static JsonObject object() {
        JsonObject o = new JsonObject();
        o.addProperty("quicbench_netty", SELF);
        o.addProperty("netty", netty());
        o.addProperty("quiche", quiche());
        o.addProperty("java", System.getProperty("java.version"));
        return o;
    }

    static String json() {
        return object().toString();
    }
}
