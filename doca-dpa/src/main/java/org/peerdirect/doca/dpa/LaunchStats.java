package org.peerdirect.doca.dpa;

import org.peerdirect.doca.DocaException;

/**
 * The kernel launch counts of one {@link DocaDpa} over its life (all its starts), for
 * {@link DocaDpaObjects}: the user's thread counts a launch as it submits it (under the
 * dispatcher's lock, before the dispatcher can see it); starts are the DPA dispatcher's count and
 * ends what the host saw of the slots' finished counts, each as last read.
 * Guarded by its monitor (one increment and one string at a time; never held while calling out).
 */
final class LaunchStats {

    private long launched;
    private long started;
    private long finished;
    private String lastLaunched = "-";
    private String lastFinished = "-";

    synchronized void launched(KernelDispatcher.Launch l) {
        launched++;
        lastLaunched = describe(l);
    }

    /** The launches the DPA's dispatcher started so far (its count, read by the host: never goes back). */
    synchronized void startedTotal(long n) {
        started = Math.max(started, n);
    }

    synchronized void finished(KernelDispatcher.Launch l) {
        finished++;
        lastFinished = describe(l);
    }

    synchronized DocaDpaObjects.Kernels snapshot(int pending, DocaException failure) {
        return new DocaDpaObjects.Kernels(launched, started, finished, pending, lastLaunched, lastFinished,
                failure == null ? null : failure.getMessage());
    }

    /** {@code hello_world x1, wait <event> > 4, completion <event> set 10}. */
    static String describe(KernelDispatcher.Launch l) {
        return l.kernel().name() + " x" + l.nthreads() + ", wait " + (l.waitEvent() == null ? "none" : "event " + eventId(l.waitEvent()) + " passes "
                + Long.toUnsignedString(l.waitThreshold())) + ", completion " + (l.compEvent() == null ? "none"
                        : "event " + eventId(l.compEvent()) + (l.add() ? " add " : " set ") + Long.toUnsignedString(l.compCount()));
    }

    private static long eventId(org.peerdirect.doca.syncevent.DocaSyncEvent e) {
        return e.id();
    }
}
