package org.peerdirect.mlx4;

import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.mlx4.core.Mr;

/**
 * {@code struct mlx4_ib_mr}: an MPT entry in hardware ownership over the umem's pages. Lock rules:
 * {@link #hwLock} guards {@link #inHardware} and is held across the HW2SW_MPT, so whoever comes
 * second (deregistration or invalidation) returns only after the key is dead; {@code this}
 * guards {@link #released} and is never held by the invalidation callback (deregistration waits
 * for a running callback in {@code stopInvalidationNotifier} while holding it). The device's
 * HW2SW_MPT fences DMA (it completes when no access through the key is in flight).
 */
final class Mlx4Mr implements IbMrOps {

    private final Mlx4Pd pd;
    private final IbUmem umem;
    private final Mr.Region region;
    private volatile boolean invalidated;
    private final java.util.concurrent.locks.ReentrantLock hwLock = new java.util.concurrent.locks.ReentrantLock();
    private boolean inHardware = true;
    private boolean released;

    Mlx4Mr(Mlx4Pd pd, IbUmem umem, Mr.Region region) {
        this.pd = pd;
        this.umem = umem;
        this.region = region;
    }

    /** {@code HW2SW_MPT} once; a device gone or reset has no key left to take back. */
    private void toSoftware() {
        hwLock.lock();
        try {
            if (!inHardware) {
                return;
            }
            inHardware = false;
            pd.ctx.dev.core.mr.disable(region);
        } catch (RuntimeException e) {
            if (pd.ctx.dev.core.loaded() && !pd.ctx.dev.core.cmd.gone()) {
                throw e; // a device gone, reset or unloaded holds no key any more
            }
        } finally {
            hwLock.unlock();
        }
    }

    /**
     * The umem's invalidation function (called with the umem's mapping lock held): {@code HW2SW_MPT}
     * before this returns, so from now on every access through the key completes with a protection
     * or access error and none touches the memory.
     */
    void revokeOnInvalidate() {
        toSoftware();
        invalidated = true;
    }

    /** The {@code mlx5r_handle_mkey_cleanup} order: revoke, stop the notifier, free the key, release the umem. */
    @Override
    public synchronized void deregMr() {
        if (released) {
            return;
        }
        released = true;
        try {
            toSoftware();
        } finally {
            umem.stopInvalidationNotifier();
            pd.ctx.dev.core.mr.free(region);
            umem.release();
        }
    }

    @Override
    public int lkey() {
        return region.key();
    }

    @Override
    public int rkey() {
        return region.key();
    }

    @Override
    public boolean isPeer() {
        return umem.isPeer();
    }

    @Override
    public boolean invalidated() {
        return invalidated;
    }

    @Override
    public String toString() {
        return String.format("MR lkey 0x%x %s%s", region.key(), umem, invalidated ? " INVALIDATED" : "");
    }
}
