package org.peerdirect.launcher;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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
 * <p>A bundle is named by id, by symbolic name or by location, or given as the Bundle object or the
 * "Bundle ID: n" text the shell hands on ({@code b = install <jar>; start $b}, {@code start ($.context
 * bundle 5)}); {@code start} and {@code install} take locations (file:, mvn:, http:) too. The
 * shell's own runtime (gogo.runtime, gogo.jline, jline) is refused to {@code stop}, {@code update}
 * and {@code uninstall} as bundle 0 is: the statement would end the shell that runs it.
 *
 * <p>{@code update} refreshes the updated bundle and every bundle wired to it, as Karaf's
 * {@code bundle:update -r} does: without it the bundles using the old revision stay Active but
 * their components stay unsatisfied until a {@code refresh} ({@code --no-refresh} names them).
 *
 * <p>Public with public methods: Gogo calls commands reflectively.
 */
public final class BundleCommands {

    static final String[] FUNCTIONS = {"install", "start", "stop", "update", "uninstall", "refresh", "shutdown"};
    /** The shell's own runtime: stopping one of these from inside the shell ends the shell. */
    static final Set<String> SHELL = Set.of("org.apache.felix.gogo.runtime", "org.apache.felix.gogo.jline", "org.jline");
    private static final long REFRESH_TIMEOUT_S = 60;
    /** What {@code install} prints, and Felix's install too: "Bundle ID: 30". */
    private static final Pattern BUNDLE_ID = Pattern.compile("(?i)bundle id: *(\\d+)");

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

    /** {@code start <bundle|location>...}: a location is installed first. */
    public void start(Object... bundles) {
        need("start", bundles, "a bundle id, symbolic name or location, for example start 5");
        for (Object b : bundles) {
            Bundle bundle = b instanceof CharSequence cs && isLocation(cs.toString()) ? installOne(cs.toString()) : find("start", b);
            act("start", bundle, () -> bundle.start());
        }
    }

    public void stop(Object... bundles) {
        need("stop", bundles, "a bundle id or symbolic name, for example stop 5");
        for (Object b : bundles) {
            Bundle bundle = find("stop", b);
            act("stop", bundle, () -> bundle.stop());
        }
    }

    public void uninstall(Object... bundles) {
        need("uninstall", bundles, "a bundle id or symbolic name");
        for (Object b : bundles) {
            Bundle bundle = find("uninstall", b);
            act("uninstall", bundle, () -> bundle.uninstall());
        }
    }

    /**
     * {@code update [--no-refresh] <bundle> [location]}: from its own location, or from the one
     * given; then refreshes it with the bundles wired to it (they restart on the new revision).
     */
    public String update(Object... args) throws InterruptedException {
        need("update", args, "a bundle id or symbolic name, and optionally a new location");
        List<Object> rest = new ArrayList<>();
        for (Object a : args) {
            rest.add(a instanceof CharSequence cs ? cs.toString() : a); // Gogo's tokens are CharSequences
        }
        boolean refresh = !rest.remove("--no-refresh");
        if (rest.isEmpty() || rest.size() > 2) {
            throw new IllegalArgumentException("update: expected a bundle and at most one location, got "
                    + args.length + " arguments (usage: update [--no-refresh] <bundle> [<location>])");
        }
        Bundle bundle = find("update", rest.get(0));
        String name = bundle.getSymbolicName();
        if (rest.size() == 1) {
            act("update", bundle, () -> bundle.update());
        } else {
            String location = String.valueOf(rest.get(1));
            act("update", bundle, () -> {
                try (var in = new java.net.URI(location).toURL().openStream()) {
                    bundle.update(in);
                } catch (java.io.IOException | java.net.URISyntaxException | IllegalArgumentException e) {
                    throw new BundleException("cannot read " + location + ": " + reason(e));
                }
            });
        }
        String updated = "update: bundle " + bundle.getBundleId() + " (" + name + ") updated"
                + (name != null && name.equals(bundle.getSymbolicName()) ? "" : " to " + bundle.getSymbolicName());
        FrameworkWiring fw = ctx.getBundle(0).adapt(FrameworkWiring.class);
        Collection<Bundle> closure = fw.getDependencyClosure(List.of(bundle));
        List<String> users = closure.stream().filter(b -> b != bundle).map(Bundle::getSymbolicName).sorted().toList();
        if (!refresh) {
            return users.isEmpty() ? updated
                    : updated + "; " + users.size() + " bundle(s) still use its old revision until a refresh: "
                            + String.join(", ", users) + " (run refresh)";
        }
        List<Bundle> active = closure.stream().filter(b -> b.getState() == Bundle.ACTIVE).toList();
        refreshAndWait("update", fw, List.of(bundle));
        // a refresh stops and starts again what was active: say so if one did not come back
        List<String> down = active.stream().filter(b -> b.getState() != Bundle.ACTIVE)
                .map(b -> b.getSymbolicName() + " is " + Container.state(b.getState())).sorted().toList();
        if (!down.isEmpty()) {
            throw new IllegalStateException(updated + " and refreshed, but these bundles did not start again: "
                    + String.join(", ", down) + " (lb lists them; start them after fixing the cause)");
        }
        return updated + (users.isEmpty() ? "" : "; refreshed with the " + users.size()
                + " bundle(s) wired to it, which restarted on the new revision: " + String.join(", ", users));
    }

    /** {@code refresh}: refreshes every bundle with stale wiring and waits (bounded) for it. */
    public void refresh() throws InterruptedException {
        refreshAndWait("refresh", ctx.getBundle(0).adapt(FrameworkWiring.class), null);
    }

    private static void refreshAndWait(String cmd, FrameworkWiring fw, Collection<Bundle> bundles) throws InterruptedException {
        var done = new CountDownLatch(1);
        fw.refreshBundles(bundles, e -> done.countDown());
        if (!done.await(REFRESH_TIMEOUT_S, TimeUnit.SECONDS)) {
            throw new IllegalStateException(cmd + ": the framework did not finish refreshing within " + REFRESH_TIMEOUT_S + " s");
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
            return FelixLogger.quietly(() -> ctx.installBundle(location));
        } catch (BundleException | RuntimeException e) {
            String why = reason(e);
            if (location.startsWith("mvn:")) {
                // pax-url: "Error resolving artifact g:a:jar:v: [Could not find artifact g:a:jar:v in central (url)]"
                Matcher repos = Pattern.compile("\\[(.+)]\\s*$").matcher(why);
                why = (repos.find() ? repos.group(1) : why) + " (the local repository "
                        + ctx.getProperty("org.ops4j.pax.url.mvn.localRepository") + " was searched first)";
            }
            throw new IllegalArgumentException("install: cannot install " + location + ": " + why, e);
        }
    }

    private static boolean isLocation(String s) {
        return s.matches("(?i)(file|mvn|https?|jar|reference):.+");
    }

    /** The bundle given as a Bundle, an id, "Bundle ID: n", a symbolic name or a location; a clear error if none. */
    private Bundle find(String cmd, Object what) {
        if (what instanceof Bundle b) {
            if (b.getState() == Bundle.UNINSTALLED) {
                throw new IllegalArgumentException(cmd + ": bundle " + b.getBundleId() + " (" + b.getSymbolicName() + ") is uninstalled");
            }
            return b;
        }
        String s = String.valueOf(what).strip();
        Matcher id = BUNDLE_ID.matcher(s);
        if (what instanceof Number || s.matches("\\d+") || id.matches()) {
            String digits = id.matches() ? id.group(1) : s;
            Bundle b = digits.length() < 19 ? ctx.getBundle(Long.parseLong(digits)) : null;
            if (b == null) {
                throw new IllegalArgumentException(cmd + ": no bundle with id " + digits + " (lb lists them)");
            }
            return b;
        }
        for (Bundle b : ctx.getBundles()) {
            if (s.equals(b.getSymbolicName()) || s.equals(b.getLocation())) {
                return b;
            }
        }
        throw new IllegalArgumentException(cmd + ": no bundle named '" + s
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
        if (SHELL.contains(bundle.getSymbolicName()) && !cmd.equals("start")) {
            // the statement would end the shell running it (Gogo's runtime ended it with a NullPointerException)
            throw new IllegalArgumentException(cmd + ": bundle " + bundle.getBundleId() + " (" + bundle.getSymbolicName()
                    + ") is the shell's own runtime and cannot be " + cmd + (cmd.endsWith("e") ? "d" : cmd.equals("stop") ? "ped" : "ed")
                    + " from inside it; leave the container with 'shutdown'");
        }
        try {
            FelixLogger.quietly(() -> {
                action.run();
                return null;
            });
        } catch (BundleException | RuntimeException e) {
            throw new IllegalStateException(cmd + ": bundle " + bundle.getBundleId() + " ("
                    + bundle.getSymbolicName() + "): " + reason(e), e);
        }
    }

    private static void need(String cmd, Object[] args, String what) {
        if (args == null || args.length == 0) {
            throw new IllegalArgumentException(cmd + ": expected " + what);
        }
    }

    /**
     * The innermost message, without exception class names where the message says enough; an
     * outer message that extends the innermost says more and is taken instead (pax-url's "Error
     * resolving artifact a:b:jar:1: [Could not find artifact a:b:jar:1 in central (url)]" over its
     * cause's "Error resolving artifact a:b:jar:1").
     */
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
            return "not a valid bundle: not a jar file (" + m + ")";
        }
        if (m == null || m.isBlank()) {
            return t.getClass().getSimpleName();
        }
        for (Throwable c = e; c != null && c != t; c = c.getCause()) {
            String outer = c.getMessage();
            if (outer != null && outer.startsWith(m) && outer.length() > m.length()) {
                return outer;
            }
        }
        return e == t || e.getMessage() == null ? m : e.getMessage() + ": " + m;
    }
}
