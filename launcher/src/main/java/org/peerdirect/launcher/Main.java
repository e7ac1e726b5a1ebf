package org.peerdirect.launcher;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;


import sun.misc.Signal;

/**
 * {@code ./peerdirect}: boots the container and runs the interactive shell, {@code -c} commands or
 * the demo script. Exit codes: 0 success ({@code shutdown} or end of input too), 1 a command or
 * a background job failed (the message names it), 2 a wrong command line, 3 the container did
 * not come up complete (or another container runs from the same home), 130 Ctrl-C in a
 * {@code -c} or demo run.
 */
public final class Main {

    static final int OK = 0;
    static final int COMMAND_FAILED = 1;
    static final int USAGE = 2;
    static final int BROKEN = 3;
    /** 128 + SIGINT, what a POSIX shell reports for a command ended by Ctrl-C. */
    static final int INTERRUPTED = 130;
    private static final long STOP_GRACE_MS = 10_000;
    /** Set by the SIGINT handler: the run ends with {@link #INTERRUPTED} whatever the statement did. */
    private static volatile boolean interrupted;
    private static final long STOP_TIMEOUT_MS = 30_000;
    /** Held so the level sticks: JUL keeps only weak references to loggers. */
    private static final java.util.logging.Logger JLINE_LOG = java.util.logging.Logger.getLogger("org.jline");

    private Main() {
    }

    public static void main(String[] args) {
        System.exit(run(args));
    }

    static int run(String... args) {
        interrupted = false; // tests run the launcher several times in one JVM
        CommandLine cl;
        try {
            cl = CommandLine.parse(args);
        } catch (CommandLine.UsageException e) {
            if (e.getMessage() != null) {
                System.err.println("peerdirect: " + e.getMessage());
            }
            System.err.print(CommandLine.USAGE);
            return e.getMessage() == null ? OK : USAGE;
        }
        // the distribution (bundles, etc/gosh_profile) is read-only; the home holds one run's state
        // (framework cache, sysfs mirror, lock): --home gives a second container its own
        Path dist = Path.of(System.getProperty("peerdirect.home", ".")).toAbsolutePath().normalize();
        Path home = cl.home() != null ? Path.of(cl.home()).toAbsolutePath().normalize() : dist;
        Path bundles = cl.bundles() != null ? Path.of(cl.bundles()) : dist.resolve("bundle");
        JfrRecording jfr;
        try {
            jfr = cl.jfr() == null ? null : JfrRecording.start(cl.jfr());
        } catch (CommandLine.UsageException e) {
            System.err.println("peerdirect: " + e.getMessage());
            return USAGE;
        }
        long t0 = System.nanoTime();
        quietLogs(cl.interactive());
        if (cl.interactive()) {
            System.out.println(banner());
        }
        // one container per home: the second would wipe the first's framework cache and sysfs mirror
        RunLock lock;
        try {
            lock = RunLock.acquire(home);
        } catch (RunLock.HeldException e) {
            System.err.println("peerdirect: " + e.getMessage());
            closeRecording(jfr);
            return BROKEN;
        } catch (IOException e) {
            System.err.println("peerdirect: cannot lock " + home + ": " + e.getMessage());
            closeRecording(jfr);
            return BROKEN;
        }
        if (cl.web() != null) {
            try {
                cl.web().checkPortFree();
            } catch (IllegalStateException e) {
                System.err.println("peerdirect: " + e.getMessage());
                lock.close();
                return BROKEN;
            }
        }
        Container container;
        try {
            List<Path> dirs = cl.web() == null ? List.of(bundles) : List.of(bundles, WebOption.bundles(dist));
            container = Container.launch(dist, home, dirs, cl.keepCache(), cl.interactive(),
                    cl.web() == null ? java.util.Map.of() : cl.web().frameworkConfig());
        } catch (Exception e) {
            System.err.println("peerdirect: the container did not start: " + e.getMessage());
            lock.close();
            closeRecording(jfr);
            return BROKEN;
        }
        AtomicBoolean stopping = new AtomicBoolean();
        // stops the container once, whoever asks first, then lets the next run have the folder
        Runnable shutdown = () -> {
            if (stopping.compareAndSet(false, true)) {
                try {
                    container.stop(STOP_TIMEOUT_MS);
                } catch (Exception e) {
                    System.err.println("peerdirect: " + e.getMessage());
                } finally {
                    lock.close();
                    closeRecording(jfr); // after the stop: the bundles' teardown is in the recording
                }
            }
        };
        // Ctrl-C: at the interactive prompt the shell's own handler interrupts the foreground job
        if (!cl.interactive()) {
            handleSigint(Thread.currentThread(), shutdown);
        }
        // SIGTERM and System.exit: still stop the bundles in order
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            shutdown.run();
        }, "peerdirect-shutdown"));

        List<String> problems = container.problems();
        if (!problems.isEmpty()) {
            System.err.println("peerdirect: these bundles are not ACTIVE:\n  "
                    + String.join("\n  ", problems));
            if (!cl.interactive()) {
                shutdown.run();
                return BROKEN;
            }
        }
        if (cl.web() != null) {
            System.out.println("peerdirect: web console at " + cl.web().address() + "/system/console/pddevices, metrics at "
                    + cl.web().address() + "/metrics");
        }
        if (Boolean.getBoolean("peerdirect.timing")) {
            System.err.printf("peerdirect: container up in %d ms%n", (System.nanoTime() - t0) / 1_000_000);
        }
        return serve(cl, container, shutdown);
    }

    private static void closeRecording(JfrRecording jfr) {
        if (jfr != null) {
            jfr.close();
        }
    }

    /**
     * Quiet by default: slf4j-simple (pax-url) at WARN; jline's "dumb terminal" notice only
     * matters in the interactive shell.
     */
    private static void quietLogs(boolean interactive) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        if (!interactive) {
            JLINE_LOG.setLevel(java.util.logging.Level.SEVERE);
        }
    }

    /**
     * Ctrl-C in -c and demo runs: the running statement is interrupted (the tools check for it),
     * the container stops cleanly and the exit code is the shell's for SIGINT (130). A statement
     * that ignores the interrupt gets STOP_GRACE_MS before the stop goes ahead anyway.
     */
    private static void handleSigint(Thread statements, Runnable shutdown) {
        Signal.handle(new Signal("INT"), sig -> {
            interrupted = true;
            statements.interrupt();
            Thread watchdog = new Thread(() -> {
                try {
                    statements.join(STOP_GRACE_MS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                if (statements.isAlive()) {
                    System.err.println("peerdirect: interrupted; the running command did not stop within "
                            + STOP_GRACE_MS / 1000 + " s, stopping the container under it");
                    shutdown.run();
                    Runtime.getRuntime().halt(INTERRUPTED);
                }
            }, "peerdirect-sigint");
            watchdog.setDaemon(true);
            watchdog.start();
        });
    }

    /** The container's life after its start: the interactive shell until it stops, or the statements; stopped at the end in any case. */
    private static int serve(CommandLine cl, Container container, Runnable shutdown) {
        try {
            if (cl.interactive()) {
                // gogo.jline's shell owns the terminal; end of input, 'shutdown' or Ctrl-C stop the framework
                container.waitForStop();
                return OK;
            }
            List<String> statements = cl.demo() ? demoScript() : cl.commands();
            int rc = runStatements(container, statements, cl.demo());
            if (cl.demo()) {
                String root = container.keepSysfsSnapshot();
                if (root != null) {
                    System.out.println("peerdirect: the sysfs tree at the end of the demo stays readable after exit: cat "
                            + root + "/kernel/infiniband/memory_peers/*/*");
                }
            }
            return interrupted ? INTERRUPTED : rc;
        } catch (Exception e) {
            if (interrupted) {
                return INTERRUPTED;
            }
            System.err.println("peerdirect: " + e.getMessage());
            return BROKEN;
        } finally {
            shutdown.run();
        }
    }

    private static int runStatements(Container container, List<String> statements, boolean echo) throws Exception {
        try (GogoSession session = GogoSession.open(container.framework().getBundleContext(), 30_000)) {
            for (String statement : statements) {
                if (echo) {
                    session.out.println("peerdirect> " + statement);
                }
                try {
                    session.run(statement);
                } catch (Exception e) {
                    if (interrupted) {
                        session.err.println("peerdirect: interrupted: " + statement);
                        return INTERRUPTED;
                    }
                    session.err.println("peerdirect: command failed: " + statement + "\n  " + Errors.message(e));
                    if (Errors.verbose()) {
                        Errors.unwrap(e).printStackTrace(session.err);
                    }
                    return COMMAND_FAILED;
                }
                if (interrupted) {
                    return INTERRUPTED;
                }
            }
            // 'cmd &' jobs: the run ends when they end, and fails if one failed
            List<String> failed = session.awaitBackgroundJobs();
            return failed.isEmpty() ? OK : COMMAND_FAILED;
        }
    }

    /** "peerdirect 0.1.0 on Felix 7.0.5, ..." from the launcher's own manifest (cnf/ext/runtime.bnd). */
    static String banner() {
        try {
            var resources = Main.class.getClassLoader().getResources("META-INF/MANIFEST.MF");
            while (resources.hasMoreElements()) {
                try (InputStream in = resources.nextElement().openStream()) {
                    var attrs = new java.util.jar.Manifest(in).getMainAttributes();
                    String runtime = attrs.getValue("Peerdirect-Runtime");
                    if (runtime != null) {
                        return "peerdirect " + attrs.getValue("Bundle-Version") + " on " + runtime
                                + ". Leave with Ctrl-D or 'shutdown'.";
                    }
                }
            }
        } catch (IOException e) {
            // no banner is no loss
        }
        return "peerdirect. Leave with Ctrl-D or 'shutdown'.";
    }

    static List<String> demoScript() throws IOException {
        try (InputStream in = Main.class.getResourceAsStream("demo.gosh")) {
            if (in == null) {
                throw new IOException("demo.gosh is missing from the launcher jar");
            }
            String text = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8)).lines()
                    .collect(Collectors.joining("\n"));
            return CommandSplitter.split(text);
        }
    }
}
