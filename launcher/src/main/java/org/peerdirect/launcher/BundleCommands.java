package org.peerdirect.launcher;

import java.util.ArrayList;
import java.util.List;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.wiring.FrameworkWiring;

/**
 * The bundle commands a script can trust: {@code install}, {@code start}, {@code stop},
 * {@code update}, {@code uninstall}, {@code refresh} (and {@code shutdown}) in the {@code peerdirect} scope, which the
 * session's {@code SCOPE} puts before Felix's own. Felix's versions print a failure (often as a
 * stack trace) and return normally, so a {@code -c} run exited 0 after a failed hot-load; these
 * throw an exception whose message names the bundle and the reason, so the launcher exits 1 and
 * the interactive shell prints one line. Felix's originals stay reachable as {@code felix:start}.
 *
 * <p>A bundle is named by id, by symbolic name or by location; {@code start} and {@code install}
 * take locations (file:, mvn:, http:) too.
 *
 * <p>Public with public methods: Gogo calls commands reflectively.
 */
public final class BundleCommands {

    static final String[] FUNCTIONS = {"install", "start", "stop", "update", "uninstall", "refresh", "shutdown"};

    private final BundleContext ctx;

    BundleCommands(BundleContext ctx) {
        this.ctx = ctx;
    }

    /** {@code install <location>...}: installs each; prints "Bundle ID: n" as Felix does. */
    public String install(String... locations) {
        need("install", locations, "a bundle location, for example install file:/path/my-bundle.jar");
        List<String> out = new ArrayList<>();
        for (String location : locations) {
            out.add("Bundle ID: " + installOne(location).getBundleId());
        }
        return String.join("\n", out);
    }

    /** {@code start <id|name|location>...}: a location is installed first. */
    public void start(String... bundles) {
        need("start", bundles, "a bundle id, symbolic name or location, for example start 5");
        for (String b : bundles) {
            Bundle bundle = isLocation(b) ? installOne(b) : find("start", b);
            act("start", bundle, () -> bundle.start());
        }
    }

    public void stop(String... bundles) {
        need("stop", bundles, "a bundle id or symbolic name, for example stop 5");
        for (String b : bundles) {
            Bundle bundle = find("stop", b);
            act("stop", bundle, () -> bundle.stop());
        }
    }

    public void uninstall(String... bundles) {
        need("uninstall", bundles, "a bundle id or symbolic name");
        for (String b : bundles) {
            Bundle bundle = find("uninstall", b);
            act("uninstall", bundle, () -> bundle.uninstall());
        }
    }

    /** {@code update <id|name> [location]}: from its own location, or from the one given. */
    public void update(String... args) {
        need("update", args, "a bundle id or symbolic name, and optionally a new location");
        if (args.length > 2) {
            throw new IllegalArgumentException("update: expected a bundle and at most one location, got "
                    + args.length + " arguments");
        }
        Bundle bundle = find("update", args[0]);
        if (args.length == 1) {
            act("update", bundle, () -> bundle.update());
            return;
        }
        String location = args[1];
        act("update", bundle, () -> {
            try (var in = new java.net.URI(location).toURL().openStream()) {
                bundle.update(in);
            } catch (java.io.IOException | java.net.URISyntaxException | IllegalArgumentException e) {
                throw new BundleException("cannot read " + location + ": " + reason(e));
            }
        });
    }

    /** {@code refresh}: refreshes every bundle with stale wiring and waits (bounded) for it. */
    public void refresh() throws InterruptedException {
        FrameworkWiring fw = ctx.getBundle(0).adapt(FrameworkWiring.class);
        var done = new java.util.concurrent.CountDownLatch(1);
        fw.refreshBundles(null, e -> done.countDown());
        if (!done.await(60, java.util.concurrent.TimeUnit.SECONDS)) {
            throw new IllegalStateException("refresh: the framework did not finish refreshing within 60 s");
        }
    }

    /** {@code shutdown}: stops the framework (bundles in reverse order); the launcher then exits 0. */
    public void shutdown() throws BundleException {
        // asynchronous by specification: the caller's command thread is not blocked by its own stop
        ctx.getBundle(0).stop();
    }

    private Bundle installOne(String location) {
        if (!isLocation(location)) {
            throw new IllegalArgumentException("install: '" + location
                    + "' is not a location (expected file:, mvn:, http: or https:)");
        }
        try {
            return ctx.installBundle(location);
        } catch (BundleException | RuntimeException e) {
            throw new IllegalArgumentException("install: cannot install " + location + ": " + reason(e), e);
        }
    }

    private static boolean isLocation(String s) {
        return s.matches("(?i)(file|mvn|https?|jar|reference):.+");
    }

    /** The bundle with this id, symbolic name or location; a clear error if none. */
    private Bundle find(String cmd, String what) {
        if (what.matches("\\d+")) {
            Bundle b = ctx.getBundle(Long.parseLong(what));
            if (b == null) {
                throw new IllegalArgumentException(cmd + ": no bundle with id " + what + " (lb lists them)");
            }
            return b;
        }
        for (Bundle b : ctx.getBundles()) {
            if (what.equals(b.getSymbolicName()) || what.equals(b.getLocation())) {
                return b;
            }
        }
        throw new IllegalArgumentException(cmd + ": no bundle named '" + what
                + "' (expected a bundle id, symbolic name or location; lb lists them)");
    }

    private interface BundleAction {
        void run() throws BundleException;
    }

    private static void act(String cmd, Bundle bundle, BundleAction action) {
        if (bundle.getBundleId() == 0 && !cmd.equals("start")) {
            // Felix's own 'stop 0' ends the whole container without a word
            throw new IllegalArgumentException(cmd + ": bundle 0 is the framework itself; leave the container with 'shutdown'");
        }
        try {
            action.run();
        } catch (BundleException | RuntimeException e) {
            throw new IllegalStateException(cmd + ": bundle " + bundle.getBundleId() + " ("
                    + bundle.getSymbolicName() + "): " + reason(e), e);
        }
    }

    private static void need(String cmd, String[] args, String what) {
        if (args == null || args.length == 0) {
            throw new IllegalArgumentException(cmd + ": expected " + what);
        }
    }

    /** The innermost message, without exception class names where the message says enough. */
    static String reason(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        String m = t.getMessage();
        if (t instanceof java.io.FileNotFoundException) {
            return "no such file (" + m + ")";
        }
        if (t instanceof java.util.zip.ZipException) {
            return "not a jar file (" + m + ")";
        }
        if (m == null || m.isBlank()) {
            return t.getClass().getSimpleName();
        }
        return e == t || e.getMessage() == null ? m : e.getMessage() + ": " + m;
    }
}
