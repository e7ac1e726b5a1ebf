package org.peerdirect.launcher;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.util.tracker.ServiceTracker;

/**
 * A Gogo session driven from the launcher. The {@code CommandProcessor} type lives in the
 * gogo.runtime bundle, not on the launcher's class path, so it is reached through the service
 * registry and called reflectively through the interface types loaded from that bundle.
 *
 * <p>The session gets the raw {@link FileDescriptor#out} / {@link FileDescriptor#err} streams:
 * gogo.runtime replaces {@code System.out} with a thread-routing stream while it runs.
 */
final class GogoSession implements AutoCloseable {

    static final String PROCESSOR = "org.apache.felix.service.command.CommandProcessor";
    private static final String SESSION = "org.apache.felix.service.command.CommandSession";
    private static final String JOB_LISTENER = "org.apache.felix.service.command.JobListener";
    /** Command lookup order: peerdirect's own, then gogo's, then every scope (etc/gosh_profile says the same). */
    static final String SCOPE_PATH = "peerdirect:gogo:*";
    /** {@code Converter.INSPECT}: the level the interactive shell formats results with. */
    private static final int INSPECT = 0;

    private final Object session;
    private final Method execute;
    private final Method format;
    private final Method close;
    private final Method jobs;
    final PrintStream out;
    final PrintStream err;

    /**
     * Jobs that went to the background ({@code cmd &}) and are not done, by identity (guarded by
     * jobLock). Not by id: Gogo numbers a closure's jobs among the session's top-level jobs only,
     * so the jobs of nested closures ({@code try { while { } { } } { }}) share one id, and a
     * caught failure inside them was taken for a failed background job.
     */
    private final java.util.Set<Object> background = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    /** Messages of background jobs that ended with an exception. */
    private final java.util.List<String> failedJobs = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final Object jobLock = new Object();
    private final Method jobId;
    private final Method jobResult;
    private final Method jobCommand;
    private final Method resultException;

    private GogoSession(Object session, Class<?> sessionType, Bundle runtime, PrintStream out, PrintStream err)
            throws ReflectiveOperationException {
        this.session = session;
        this.execute = sessionType.getMethod("execute", CharSequence.class);
        this.format = sessionType.getMethod("format", Object.class, int.class);
        this.close = sessionType.getMethod("close");
        this.jobs = sessionType.getMethod("jobs");
        this.out = out;
        this.err = err;
        // our commands before Felix's (BundleCommands), then gogo's, then the rest: as the profile does
        sessionType.getMethod("put", String.class, Object.class).invoke(session, "SCOPE", SCOPE_PATH);
        Class<?> listenerType = runtime.loadClass(JOB_LISTENER);
        // called through the public interfaces: the implementation classes are package-private
        Class<?> jobType = runtime.loadClass("org.apache.felix.service.command.Job");
        this.jobId = jobType.getMethod("id");
        this.jobResult = jobType.getMethod("result");
        this.jobCommand = jobType.getMethod("command");
        this.resultException = runtime.loadClass("org.apache.felix.service.command.Result").getMethod("exception");
        Object listener = java.lang.reflect.Proxy.newProxyInstance(listenerType.getClassLoader(),
                new Class<?>[] {listenerType}, (proxy, method, args) -> {
                    if (method.getName().equals("jobChanged")) {
                        jobChanged(args[0], String.valueOf(args[2]));
                        return null;
                    }
                    return switch (method.getName()) {
                        case "hashCode" -> System.identityHashCode(proxy);
                        case "equals" -> proxy == args[0];
                        default -> "GogoSession job listener";
                    };
                });
        sessionType.getMethod("setJobListener", listenerType).invoke(session, listener);
    }

    /**
     * Gogo reports a background job's end only as "Done"; its exception went nowhere. A job that
     * went to the background is remembered; when it is done its result is checked and a failure
     * printed and kept, so the run's exit code says so. A job run in the foreground (every
     * statement and every closure inside one) throws its failure to whoever ran it, which may
     * catch it: it is none of this listener's business. Gogo calls the listener with "Background"
     * before it submits the job, so a job's "Done" always comes after it.
     */
    private void jobChanged(Object job, String status) {
        try {
            switch (status) {
                case "Background" -> {
                    synchronized (jobLock) {
                        background.add(job);
                    }
                }
                case "Done" -> {
                    Object result = jobResult.invoke(job);
                    Object ex = result == null ? null : resultException.invoke(result);
                    synchronized (jobLock) {
                        if (background.remove(job) && ex instanceof Exception e) {
                            String command = String.valueOf(jobCommand.invoke(job)).trim();
                            String msg = "background job [" + jobId.invoke(job) + "] '" + command + "' failed: " + Errors.message(e);
                            failedJobs.add(msg); // before the waiter is woken below
                            err.println("peerdirect: " + msg);
                        }
                        jobLock.notifyAll();
                    }
                }
                default -> {
                    // Created, Foreground, Suspended: nothing to track
                }
            }
        } catch (ReflectiveOperationException e) {
            err.println("peerdirect: cannot read a background job's state: " + e);
        }
    }

    /** Waits until every background job has ended; returns the failures (empty: all succeeded). */
    java.util.List<String> awaitBackgroundJobs() throws InterruptedException, ReflectiveOperationException {
        synchronized (jobLock) {
            // the session's job list holds the jobs not yet done (Gogo removes a job when it is,
            // just before it tells the listener: so also until the listener has seen every end)
            while (!((java.util.List<?>) jobs.invoke(session)).isEmpty() || !background.isEmpty()) {
                jobLock.wait(200); // bounded: a job that ended between the check and the wait
            }
        }
        return java.util.List.copyOf(failedJobs);
    }

    /** Waits (bounded) for the command processor and opens a session on the process's own streams. */
    static GogoSession open(BundleContext context, long timeoutMillis) throws Exception {
        return open(context, timeoutMillis,
                new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8),
                new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
    }

    /** A session writing to the given streams (tests capture what a user would see). */
    static GogoSession open(BundleContext context, long timeoutMillis, PrintStream out, PrintStream err) throws Exception {
        ServiceTracker<Object, Object> tracker = new ServiceTracker<>(context, PROCESSOR, null);
        tracker.open(true);
        try {
            Object processor = tracker.waitForService(timeoutMillis);
            if (processor == null) {
                throw new IllegalStateException("the Gogo command processor did not appear within "
                        + TimeUnit.MILLISECONDS.toSeconds(timeoutMillis)
                        + " s: is org.apache.felix.gogo.runtime installed and ACTIVE? (run with -c lb to see)");
            }
            Bundle runtime = tracker.getServiceReference().getBundle();
            Class<?> processorType = runtime.loadClass(PROCESSOR);
            Class<?> sessionType = runtime.loadClass(SESSION);
            InputStream in = new FileInputStream(FileDescriptor.in);
            Object session = processorType.getMethod("createSession", InputStream.class, OutputStream.class,
                    OutputStream.class).invoke(processor, in, out, err);
            return new GogoSession(session, sessionType, runtime, out, err);
        } finally {
            tracker.close();
        }
    }

    /**
     * Runs one statement and prints its formatted result the way the interactive shell does.
     *
     * @throws Exception what the command threw (Gogo's {@code CommandNotFoundException} for an
     *                   unknown command), unwrapped from reflection
     */
    void run(String statement) throws Exception {
        try {
            Object result = execute.invoke(session, statement);
            if (result != null) {
                out.println(format.invoke(session, result, INSPECT));
            }
            out.flush();
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception ex) {
                throw ex;
            }
            throw e;
        }
    }

    @Override
    public void close() {
        try {
            close.invoke(session);
        } catch (ReflectiveOperationException e) {
            // the runtime went away first: nothing left to close
        }
    }
}
