package org.peerdirect.launcher;

import org.osgi.framework.Bundle;
import org.osgi.framework.ServiceReference;

/**
 * Felix's own log ({@code felix.log.logger}): one line per event, the stack trace only under
 * {@code -v}. Felix's default logger printed the whole trace of every failure it logs: 72 lines of
 * {@code ZipFile} for an update from a file that is not a jar, which the {@code update} command
 * then reported again in one line.
 *
 * <p>A bundle command that reports a framework failure itself ({@link BundleCommands}) runs the
 * framework call {@linkplain #quietly quietly}: what Felix logs on that thread meanwhile is the
 * same failure, and is left to the command's own message (and to {@code -v}).
 */
final class FelixLogger extends org.apache.felix.framework.Logger {

    /** Set while the current thread runs a framework call whose failure its caller reports. */
    private static final ThreadLocal<Boolean> QUIET = new ThreadLocal<>();

    interface Action<T, E extends Exception> {
        T run() throws E;
    }

    /** Runs a framework call whose failure the caller words itself. */
    static <T, E extends Exception> T quietly(Action<T, E> action) throws E {
        Boolean outer = QUIET.get();
        QUIET.set(Boolean.TRUE);
        try {
            return action.run();
        } finally {
            QUIET.set(outer);
        }
    }

    @Override
    @SuppressWarnings("rawtypes")
    protected void doLog(Bundle bundle, ServiceReference sr, int level, String msg, Throwable throwable) {
        if (Errors.verbose()) {
            super.doLog(bundle, sr, level, msg, throwable);
            return;
        }
        if (QUIET.get() != null && level <= LOG_ERROR) {
            return;
        }
        if (throwable == null) {
            super.doLog(bundle, sr, level, msg, null);
            return;
        }
        super.doLog(bundle, sr, level, msg + " (" + BundleCommands.reason(throwable) + "; -v shows the trace)", null);
    }
}
