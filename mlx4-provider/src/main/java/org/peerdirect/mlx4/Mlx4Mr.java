package org.peerdirect.mlx4;

import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * {@code struct mlx4_ib_mr}. Lock rules: {@code this} guards the life flags; the engine's MPT lock
 * fences DMA against revocation.
 */
final class Mlx4Mr implements IbvMr {

    private final Mlx4Pd pd;
    private final IbUmem umem;
    private final int key;
    private final int access;
    private volatile boolean invalidated;
    private boolean memoryReleased;
    private boolean deregistered;

    Mlx4Mr(Mlx4Pd pd, IbUmem umem, int key, int access) {
        this.pd = pd;
        this.umem = umem;
        this.key = key;
        this.access = access;
    }

    /**
     * The umem's invalidation function (called with the umem's mapping lock held): the MPT is
     * revoked before this returns, so from now on every access through the keys completes with a
     * protection or access error and none touches the memory.
     */
    void revokeOnInvalidate() {
        pd.ctx.dev.engine.revokeMpt(key);
        invalidated = true;
    }

    /** Device removal: the key is already revoked by the engine; give the memory back now. */
    synchronized void releaseMemory() {
        if (memoryReleased) {
            return;
        }
        memoryReleased = true;
        umem.stopInvalidationNotifier();
        umem.release();
    }

    @Override
    public synchronized void dereg() {
        if (deregistered) {
            throw new KernelException(Errno.EINVAL, "ibv_dereg_mr: MR with lkey 0x" + Integer.toHexString(key) + " is already deregistered");
        }
        deregistered = true;
        try {
            if (!memoryReleased) {
                // the mlx5r_handle_mkey_cleanup order: revoke, stop the notifier, destroy the key, release the umem
                pd.ctx.dev.engine.revokeMpt(key);
                memoryReleased = true;
                umem.stopInvalidationNotifier();
                pd.ctx.dev.engine.freeMpt(key);
                umem.release();
            }
        } finally {
            pd.mrs.remove(this);
        }
    }

    @Override
    public int lkey() {
        return key;
    }

    @Override
    public int rkey() {
        return key;
    }

    @Override
    public long addr() {
        return umem.address();
    }

    @Override
    public long length() {
        return umem.length();
    }

    @Override
    public int access() {
        return access;
    }

    @Override
    public IbvPd pd() {
        return pd;
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
        return String.format("MR lkey 0x%x %s%s", key, umem, invalidated ? " INVALIDATED" : "");
    }
}
