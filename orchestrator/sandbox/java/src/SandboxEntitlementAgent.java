// The entitlement agent is not published on Maven Central. The server attaches whatever jar sits in
// lib/entitlement-agent/ and passes the initializer's class name: calling it gives real enforcement.
import java.lang.instrument.Instrumentation;

public final class SandboxEntitlementAgent {
    private SandboxEntitlementAgent() {}

    public static void agentmain(String initializerClass, Instrumentation inst) throws Exception {
        Class.forName(initializerClass).getMethod("initialize", Instrumentation.class).invoke(null, inst);
    }
}
