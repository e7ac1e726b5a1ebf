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
    /** {@code Converter.INSPECT}: the level the interactive shell formats results with. */
    private static final int INSPECT = 0;

    private final Object session;
    private final Method execute;
    private final Method format;
    private final Method close;
    final PrintStream out;
    final PrintStream err;

    private GogoSession(Object session, Class<?> sessionType, PrintStream out, PrintStream err)
            throws NoSuchMethodException {
        this.session = session;
        this.execute = sessionType.getMethod("execute", CharSequence.class);
        this.format = sessionType.getMethod("format", Object.class, int.class);
        this.close = sessionType.getMethod("close");
        this.out = out;
        this.err = err;
    }

    /** Waits (bounded) for the command processor and opens a session on the process's own streams. */
    static GogoSession open(BundleContext context, long timeoutMillis) throws Exception {
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
            PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
            PrintStream err = new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8);
            Object session = processorType.getMethod("createSession", InputStream.class, OutputStream.class,
                    OutputStream.class).invoke(processor, in, out, err);
            return new GogoSession(session, sessionType, out, err);
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
