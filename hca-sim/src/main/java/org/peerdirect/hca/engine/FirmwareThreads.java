package org.peerdirect.hca.engine;

import java.time.Duration;

/**
 * The end of a device model's firmware thread at the function's removal, shared by the
 * ConnectX-3 and ConnectX-4 models: the removal must not return while the firmware still runs a
 * command (it would touch memory the driver is about to take back), and must not eat the caller's
 * interruption either.
 */
public final class FirmwareThreads {

    private FirmwareThreads() {
    }

    /**
     * Interrupts {@code t} and waits for it to end, at most {@code bound}, even when the caller is
     * interrupted before or during the wait (an interrupt ends one join; the next waits on).
     *
     * @return whether the caller was interrupted: it restores its flag once its close is done
     * @see "kthread_stop() in kernel/kthread.c"
     */
    public static boolean kthreadStop(Thread t, Duration bound) {
        t.interrupt();
        boolean interrupted = Thread.interrupted(); // a flag set before: the joins below would throw at once
        for (long end = System.nanoTime() + bound.toNanos(), left; t.isAlive() && (left = end - System.nanoTime()) > 0;) {
            try {
                t.join(Duration.ofNanos(left));
            } catch (InterruptedException e) {
                interrupted = true; // the flag is cleared by the throw: the next join waits
            }
        }
        return interrupted;
    }
}
