package org.peerdirect.mlx5.ib;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * An ODP-style mkey's use count ({@code mmkey.usecount} with {@code mmkey.wait}): page faults and
 * prefetches hold the MR while they work on it; deregistration ({@link Mlx5Odp#eraseOdpMkey})
 * stops new users and waits for the last one. One per {@link Mlx5Odp.OdpMkey}: explicit, implicit
 * (and each child) and dma-buf MRs alike.
 *
 * <p>Lock: {@link #lock} guards {@link #count}; -1 once deregistration began.
 */
final class Mlx5MkeyUse {

    /** A fault cannot hold the MR longer than its walk's timeout plus a UMR's: after this something is wrong. */
    static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition unused = lock.newCondition();
    private int count;

    /** {@code mlx5r_get_odp_mkey}-like: false once deregistration began. */
    boolean get() {
        lock.lock();
        try {
            if (count < 0) {
                return false;
            }
            count++;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** {@code mlx5r_deref_odp_mkey}. */
    void put() {
        lock.lock();
        try {
            if (count > 0 && --count == 0) {
                unused.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code mlx5r_deref_wait_odp_mkey}: no new user; waits until none is left, bounded by
     * {@link #WAIT_NANOS} (then logged, and the deregistration goes on: a straggling fault finds
     * the umem released and resumes with an error). An interrupt does not cut the wait short (dereg
     * must finish); it is kept for the caller.
     */
    void derefWait(int mkey) {
        boolean interrupted = false;
        lock.lock();
        try {
            long left = WAIT_NANOS;
            while (count > 0 && left > 0) {
                try {
                    left = unused.awaitNanos(left);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (count > 0) {
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.ERROR,
                        String.format("mkey 0x%x: %d page faults still use the MR after 30 s; deregistering anyway", mkey, count));
            }
            count = -1;
        } finally {
            lock.unlock();
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
