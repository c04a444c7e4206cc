// Starts one Elasticsearch node in this JVM, doing what the unpublished CLI launcher does:
// build the ServerArgs the server expects on standard input, then call the real main.
// The server exits when its standard input ends, so we hand it a stream that never does.
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

public final class SandboxLauncher {
    private SandboxLauncher() {}

    public static void main(String[] args) throws Exception {
        Path home = Path.of(System.getProperty("es.path.home"));
        Path conf = Path.of(System.getProperty("es.path.conf"));
        Map<String, String> overrides = new HashMap<>();
        overrides.put("path.home", home.toString());

        Class<?> logConfigurator = Class.forName("org.elasticsearch.common.logging.LogConfigurator");
        logConfigurator.getMethod("configureESLogging").invoke(null);

        Class<?> settingsClass = Class.forName("org.elasticsearch.common.settings.Settings");
        Object emptySettings = settingsClass.getField("EMPTY").get(null);
        Class<?> preparer = Class.forName("org.elasticsearch.node.InternalSettingsPreparer");
        Method prepare = preparer.getMethod("prepareEnvironment", settingsClass, Map.class, Path.class,
                java.util.function.Supplier.class);
        java.util.function.Supplier<String> nodeName = () -> "sandbox-node";
        Object env = prepare.invoke(null, emptySettings, overrides, conf, nodeName);

        Class<?> keystoreClass = Class.forName("org.elasticsearch.common.settings.KeyStoreWrapper");
        Object keystore = keystoreClass.getMethod("create").invoke(null);
        keystoreClass.getMethod("addBootstrapSeed", keystoreClass).invoke(null, keystore);
        // A secured sandbox: the `elastic` user's first password, as `elasticsearch-keystore add
        // bootstrap.password` would store it, read from a file only the node's user can read.
        String bootstrapFile = System.getProperty("sandbox.bootstrap_password_file");
        if (bootstrapFile != null && Files.exists(Path.of(bootstrapFile))) {
            char[] password = Files.readString(Path.of(bootstrapFile)).strip().toCharArray();
            keystoreClass.getMethod("setString", String.class, char[].class)
                .invoke(keystore, "bootstrap.password", password);
        }

        Class<?> envClass = env.getClass();
        Object settings = envClass.getMethod("settings").invoke(env);
        Object configDir = envClass.getMethod("configDir").invoke(env);
        Object logsDir = envClass.getMethod("logsDir").invoke(env);

        Class<?> serverArgsClass = Class.forName("org.elasticsearch.bootstrap.ServerArgs");
        Object serverArgs = newServerArgs(serverArgsClass, keystore, settings, configDir, logsDir);

        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        Class<?> streamOutputClass = Class.forName("org.elasticsearch.common.io.stream.OutputStreamStreamOutput");
        Object out = streamOutputClass.getConstructor(java.io.OutputStream.class).newInstance(bytes);
        Class<?> streamOutputBase = Class.forName("org.elasticsearch.common.io.stream.StreamOutput");
        serverArgsClass.getMethod("writeTo", streamOutputBase).invoke(serverArgs, out);
        streamOutputClass.getMethod("flush").invoke(out);

        System.setIn(new SequenceInputStream(new ByteArrayInputStream(bytes.toByteArray()), new NeverEndingStream()));

        Class<?> server = Class.forName("org.elasticsearch.bootstrap.Elasticsearch");
        Method main = server.getDeclaredMethod("main", String[].class);
        main.setAccessible(true);
        main.invoke(null, (Object) new String[0]);
    }

    // ServerArgs gained and lost fields across versions: pick the constructor by its arity.
    private static Object newServerArgs(Class<?> cls, Object keystore, Object settings, Object configDir, Object logsDir)
            throws Exception {
        for (Constructor<?> c : cls.getConstructors()) {
            Class<?>[] p = c.getParameterTypes();
            if (p.length == 7 && p[0] == boolean.class) {
                return c.newInstance(false, false, null, keystore, settings, configDir, logsDir);
            }
        }
        throw new IllegalStateException("no known ServerArgs constructor in this Elasticsearch version");
    }

    /** Blocks forever on read: the server treats end of input as a request to stop. */
    private static final class NeverEndingStream extends InputStream {
        @Override
        public int read() {
            try {
                Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return -1;
        }
    }
}
