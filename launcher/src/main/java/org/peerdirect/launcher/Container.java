package org.peerdirect.launcher;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.launch.Framework;
import org.osgi.framework.launch.FrameworkFactory;
import org.osgi.framework.startlevel.BundleStartLevel;
import org.osgi.framework.startlevel.FrameworkStartLevel;
import org.osgi.framework.wiring.BundleRevision;
import org.osgi.framework.wiring.BundleWiring;

/**
 * The embedded Felix framework with the distribution's bundles.
 *
 * <p>Start order: third-party runtime bundles first (SCR, Configuration Admin, Log, Gogo), then the
 * project bundles, and gogo.jline last, so the shell appears when everything else is up. Stopping
 * the framework stops bundles in reverse start order (OSGi start levels do this for us).
 */
final class Container {

    /** Third-party bundles that must be up before anything else starts, in this order. */
    /** The web console's bundles that must start before the rest of web/: SPI Fly (with ASM) before slf4j 2, its provider before Jetty. */
    private static final List<String> WEB_FIRST = List.of("org.objectweb.asm", "org.objectweb.asm.tree", "org.objectweb.asm.analysis",
            "org.objectweb.asm.commons", "org.objectweb.asm.util", "org.apache.aries.spifly.dynamic.bundle", "slf4j.api", "slf4j.simple");
    private static final List<String> FIRST = List.of("org.osgi.util.function", "org.osgi.util.promise",
            "org.osgi.service.component", "org.apache.felix.log", "org.apache.felix.configadmin",
            "org.apache.felix.scr", "org.apache.felix.gogo.runtime", "org.apache.felix.gogo.command");
    /** Project bundles in dependency order: the kernel first, drivers after the core, clients last. */
    // Peer clients start before the IB core and so stop after it: at shutdown the core revokes
    // the registrations still alive instead of each client's stop waiting for them to go.
    private static final List<String> PROJECT = List.of("peer-mem-api", "sim-kernel", "hca-sim", "gpu-sim", "nvidia", "example-peer-mem",
            "gpu-peer-mem", "ssd-sim", "nvme", "ssd-peer-mem", "ib-core", "mlx4-provider", "mlx5-provider", "rdma-tools", "flexio-dev", "flexio", "doca-core", "doca-dpa-dev", "doca-dpa", "doca-rdma", "doca-verbs", "dpa-samples", "umem-test");
    private static final String SHELL = "org.apache.felix.gogo.jline";
    private static final String JLINE = "org.jline";
    /** slf4j-simple's level for pax-url-aether (read when its first logger is made, after this is set). */
    private static final String PAX_URL_LOG = "org.slf4j.simpleLogger.log.org.ops4j.pax.url";
    /** How long a non-interactive run waits for gogo.jline to run etc/gosh_profile. */
    private static final long PROFILE_TIMEOUT_MS = 30_000;

    private final Framework framework;

    private Container(Framework framework) {
        this.framework = framework;
    }

    /** The JDK package JFR-instrumented event classes call into (see {@link #launch}). */
    static final String JFR_BOOT_DELEGATION = "jdk.jfr.internal.event";

    static Container launch(Path dist, Path home, Path bundleDir, boolean keepCache, boolean interactive)
            throws Exception {
        return launch(dist, home, List.of(bundleDir), keepCache, interactive, Map.of());
    }

    /** With more bundle folders (the web console's) and framework properties for them ({@link WebOption}). */
    static Container launch(Path dist, Path home, List<Path> bundleDirs, boolean keepCache, boolean interactive, Map<String, Object> extra)
            throws Exception {
        Map<String, Object> config = new HashMap<>(extra);
        config.put(Constants.FRAMEWORK_STORAGE, home.resolve("cache").toString());
        if (!keepCache) {
            config.put(Constants.FRAMEWORK_STORAGE_CLEAN, Constants.FRAMEWORK_STORAGE_CLEAN_ONFIRSTINIT);
        }
        // sysfs mirror: cat launcher/target/peerdirect/sys/...
        config.put("peerdirect.sysfs.root", home.resolve("sys").toString());
        // state devices keep across runs (an SSD's media file); survives restarts and kill -9
        config.put("peerdirect.state.dir", home.resolve("state").toString());
        // Felix's own logger: errors only, the Log service carries the rest; one line each (trace with -v)
        // JFR's instrumentation of the bundles' event classes (org.peerdirect.* events) makes their
        // commit() call the JDK's jdk.jfr.internal.event.EventWriter, which no bundle imports: the
        // class loaders must delegate that package to the JDK, or a recorded commit fails
        config.put(Constants.FRAMEWORK_BOOTDELEGATION, JFR_BOOT_DELEGATION);
        config.put("felix.log.level", "1");
        config.put("felix.log.logger", new FelixLogger());
        // gogo.jline: our profile (prompt, scope) from <home>/etc/gosh_profile; in non-interactive
        // runs its shell thread only reads the profile and must not stop the framework afterwards
        config.put("gosh.home", dist.toString());
        config.put("gosh.args", interactive ? "" : "--nointeractive --noshutdown");
        // pax-url logs a failed resolution with its whole trace at WARN; the install command says it in one line
        if (!Errors.verbose()) {
            System.setProperty(PAX_URL_LOG, System.getProperty(PAX_URL_LOG, "error"));
        }
        // install mvn:group/artifact/version through pax-url-aether from the local repository first
        config.put("org.ops4j.pax.url.mvn.localRepository",
                Path.of(System.getProperty("user.home"), ".m2", "repository").toString());
        config.put("org.ops4j.pax.url.mvn.useFallbackRepositories", "false");
        config.put("org.ops4j.pax.url.mvn.repositories",
                "https://repo1.maven.org/maven2@id=central");
        FrameworkFactory factory = ServiceLoader.load(FrameworkFactory.class).findFirst().orElseThrow(
                () -> new IllegalStateException("no OSGi framework on the class path (expected "
                        + "org.apache.felix.framework.jar in the lib folder)"));
        @SuppressWarnings({"unchecked", "rawtypes"})
        Framework framework = factory.newFramework((Map) config); // Felix takes its logger as an object
        framework.init();
        Container c = new Container(framework);
        c.forgetWebBundles(WebOption.bundles(dist), bundleDirs);
        int top = c.install(bundleDirs.get(0), 1);
        framework.start();
        // before the runtime bundle starts: every processor it registers is hooked from its first session
        GogoHooks.install(framework.getBundleContext());
        c.registerBundleCommands();
        c.raiseStartLevel(top);
        // the web console's bundles once the container is up: its wirings stay as they are (slf4j 1.7 for
        // pax-url-aether) when web/'s slf4j 2, which also exports the 1.7 API, comes for Jetty 12
        for (Path more : bundleDirs.subList(1, bundleDirs.size())) {
            top = c.install(more, top);
            c.raiseStartLevel(top);
        }
        c.startShell(interactive);
        return c;
    }

    /** The bundle commands a script can trust ({@link BundleCommands}, {@link ShellCommands}), before any shell exists. */
    private void registerBundleCommands() {
        java.util.Dictionary<String, Object> props = new java.util.Hashtable<>();
        props.put("osgi.command.scope", "peerdirect");
        props.put("osgi.command.function", BundleCommands.FUNCTIONS);
        framework.getBundleContext().registerService(Object.class, new BundleCommands(framework.getBundleContext()), props);
        props.put("osgi.command.function", ShellCommands.FUNCTIONS);
        framework.getBundleContext().registerService(Object.class, new ShellCommands(), props);
    }

    /**
     * A kept cache ({@code --keep-cache}) remembers the web console's bundles of a run with
     * {@code --web}; a run without it must not start them (Jetty would listen on its default port,
     * on every address), so they are uninstalled before anything starts.
     */
    private void forgetWebBundles(Path webDir, List<Path> bundleDirs) throws BundleException {
        if (bundleDirs.contains(webDir)) {
            return;
        }
        String prefix = webDir.toUri().toString();
        for (Bundle b : framework.getBundleContext().getBundles()) {
            if (b.getLocation().startsWith(prefix)) {
                b.uninstall();
            }
        }
    }

    /**
     * Installs every jar of the folder, each at its own start level above {@code level}; returns
     * the highest level.
     */
    private int install(Path bundleDir, int level) throws IOException, BundleException {
        List<Path> jars;
        try (Stream<Path> s = Files.list(bundleDir)) {
            jars = s.filter(p -> p.toString().endsWith(".jar")).sorted().toList();
        } catch (java.nio.file.NoSuchFileException e) {
            jars = List.of();
        }
        if (jars.isEmpty()) {
            throw new IllegalStateException("no bundles in " + bundleDir + ": build first (./peerdirect builds)");
        }
        var ctx = framework.getBundleContext();
        List<Bundle> bundles = new ArrayList<>();
        for (Path jar : jars) {
            String location = jar.toUri().toString();
            Bundle existing = ctx.getBundle(location);
            if (existing != null) {
                // a kept cache: refresh the bundle if the jar was rebuilt since
                if (Files.getLastModifiedTime(jar).toMillis() > existing.getLastModified()) {
                    existing.update();
                }
                bundles.add(existing);
            } else {
                bundles.add(ctx.installBundle(location));
            }
        }
        bundles.sort(Comparator.comparingInt(Container::rank));
        // start levels make framework stop go in exactly the reverse of this order
        for (Bundle b : bundles) {
            b.adapt(BundleStartLevel.class).setStartLevel(++level);
        }
        // bundles installed later at run time (install/start in the shell) start at once
        framework.adapt(FrameworkStartLevel.class).setInitialBundleStartLevel(1);
        for (Bundle b : bundles) {
            if (!isFragment(b) && !SHELL.equals(b.getSymbolicName())) {
                // marks the bundle persistently started; it starts when the framework reaches its level
                b.start(Bundle.START_ACTIVATION_POLICY);
            }
        }
        return level;
    }

    /** Raises the framework start level to {@code top}, starting bundles one level at a time, and waits. */
    private void raiseStartLevel(int top) throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        framework.adapt(FrameworkStartLevel.class).setStartLevel(top, event -> done.countDown());
        if (!done.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("bundles did not finish starting within 60 s (a bundle activator is hanging)");
        }
    }

    /**
     * Starts gogo.jline last, with the jline bundle's class loader as context class loader: jline
     * 3.30 finds its terminal providers through it, and without them the shell gets a "dumb"
     * terminal with no line editing. The activator builds the terminal during this start call.
     *
     * <p>Without a prompt ({@code -c}, demo) the shell's thread only runs the profile: it is waited
     * for, so a short run does not stop the framework under the profile (the stop unregisters
     * gogo.jline's commands first, and the profile died with "Command not found: if" and a trace).
     */
    private void startShell(boolean interactive) throws BundleException, InterruptedException {
        var ctx = framework.getBundleContext();
        Bundle shell = null;
        ClassLoader jline = null;
        for (Bundle b : ctx.getBundles()) {
            if (SHELL.equals(b.getSymbolicName())) {
                shell = b;
            } else if (JLINE.equals(b.getSymbolicName()) && b.adapt(BundleWiring.class) != null) {
                jline = b.adapt(BundleWiring.class).getClassLoader();
            }
        }
        if (shell == null) {
            return;
        }
        Thread t = Thread.currentThread();
        ClassLoader saved = t.getContextClassLoader();
        t.setContextClassLoader(jline != null ? jline : saved);
        java.util.Set<Thread> before = Thread.getAllStackTraces().keySet();
        try {
            shell.start(Bundle.START_ACTIVATION_POLICY);
        } finally {
            t.setContextClassLoader(saved);
        }
        if (!interactive) {
            for (Thread profile : Thread.getAllStackTraces().keySet()) {
                // gogo.jline's activator names its thread so; it ends once the profile ran (--nointeractive)
                if (!before.contains(profile) && "Gogo shell".equals(profile.getName())) {
                    profile.join(PROFILE_TIMEOUT_MS);
                }
            }
        }
    }

    private static int rank(Bundle b) {
        String bsn = b.getSymbolicName() == null ? "" : b.getSymbolicName();
        int i = FIRST.indexOf(bsn);
        if (i >= 0) {
            return i;
        }
        int w = WEB_FIRST.indexOf(bsn);
        if (w >= 0) {
            return 50 + w;
        }
        if (bsn.equals(SHELL)) {
            return 1000;
        }
        if (bsn.startsWith(JLINE)) {
            return 999;
        }
        if (bsn.startsWith("org.peerdirect.")) {
            int p = PROJECT.indexOf(bsn.substring("org.peerdirect.".length()));
            return 500 + (p >= 0 ? p : PROJECT.size());
        }
        return 100;
    }

    static boolean isFragment(Bundle b) {
        BundleRevision rev = b.adapt(BundleRevision.class);
        return rev != null && (rev.getTypes() & BundleRevision.TYPE_FRAGMENT) != 0;
    }

    Framework framework() {
        return framework;
    }

    /** Bundles that should be ACTIVE but are not, each with the reason bnd/Felix gave. */
    List<String> problems() {
        List<String> out = new ArrayList<>();
        for (Bundle b : framework.getBundleContext().getBundles()) {
            if (b.getBundleId() == 0 || isFragment(b)) {
                continue;
            }
            if (b.getState() != Bundle.ACTIVE) {
                String why = "";
                try {
                    b.start();
                } catch (BundleException e) {
                    why = ": " + e.getMessage();
                }
                if (b.getState() != Bundle.ACTIVE) {
                    out.add(b.getSymbolicName() + " is " + state(b.getState()) + why);
                }
            }
        }
        return out;
    }

    static String state(int s) {
        return switch (s) {
            case Bundle.INSTALLED -> "INSTALLED (unresolved)";
            case Bundle.RESOLVED -> "RESOLVED";
            case Bundle.STARTING -> "STARTING";
            case Bundle.STOPPING -> "STOPPING";
            case Bundle.ACTIVE -> "ACTIVE";
            default -> "UNINSTALLED";
        };
    }

    /** Stops every bundle in reverse start order and waits (bounded) for the framework to end. */
    void stop(long timeoutMillis) throws Exception {
        if ((framework.getState() & (Bundle.ACTIVE | Bundle.STARTING)) != 0) {
            framework.stop();
        }
        FrameworkEvent e = framework.waitForStop(timeoutMillis);
        if (e.getType() == FrameworkEvent.WAIT_TIMEDOUT) {
            throw new IllegalStateException("the framework did not stop within " + timeoutMillis
                    + " ms; a bundle's stop is hanging (see the thread dump with jstack)");
        }
    }

    FrameworkEvent waitForStop() throws InterruptedException {
        return framework.waitForStop(0);
    }

    /**
     * Freezes the sysfs mirror so its files outlive the container (the demo's statistics stay
     * readable with cat). Returns the mirror root, or null when sysfs is not running. The Sysfs
     * type lives inside the framework, so it is called by name.
     */
    String keepSysfsSnapshot() {
        org.osgi.framework.BundleContext ctx = framework().getBundleContext();
        org.osgi.framework.ServiceReference<?> ref = ctx.getServiceReference("org.peerdirect.kernel.sysfs.Sysfs");
        if (ref == null) {
            return null;
        }
        Object sysfs = ctx.getService(ref);
        try {
            sysfs.getClass().getMethod("freezeMirror").invoke(sysfs);
            return String.valueOf(sysfs.getClass().getMethod("root").invoke(sysfs));
        } catch (ReflectiveOperationException e) {
            System.err.println("peerdirect: could not keep the sysfs snapshot: " + e);
            return null;
        } finally {
            ctx.ungetService(ref);
        }
    }
}
