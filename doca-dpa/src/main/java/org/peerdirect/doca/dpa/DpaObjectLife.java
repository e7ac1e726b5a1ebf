package org.peerdirect.doca.dpa;

import org.peerdirect.flexio.FlexioException;

/**
 * The life steps DOCA DPA's objects on a context share (completion contexts, async ops, thread
 * groups): a create that needs the context started, and a start that builds FlexIO objects and
 * DPA memory under the context's lock and lets go of what it made when a step fails.
 *
 * <p>Lock: both take the DPA context's lock for their duration (reentrant: a caller may hold it).
 */
final class DpaObjectLife {

    private DpaObjectLife() {
    }

    /** BAD_STATE (INVALID_VALUE once destroyed) unless {@code dpa} is started: what {@code w}'s create checks. */
    static void requireStarted(DocaDpa dpa, String w) {
        dpa.lock.lock();
        try {
            dpa.process(w);
        } finally {
            dpa.lock.unlock();
        }
    }

    /**
     * Runs {@code build} under the context's lock; when it fails, {@code release} undoes what it
     * made (under the lock still) and the failure is thrown, a FlexIO one as DOCA's
     * ({@link DocaDpa#flexio}: DRIVER, or TIME_OUT).
     */
    static void start(DocaDpa dpa, String w, Runnable build, Runnable release) {
        dpa.lock.lock();
        try {
            build.run();
        } catch (FlexioException e) {
            release.run();
            throw DocaDpa.flexio(w, e);
        } catch (RuntimeException e) {
            release.run();
            throw e;
        } finally {
            dpa.lock.unlock();
        }
    }
}
