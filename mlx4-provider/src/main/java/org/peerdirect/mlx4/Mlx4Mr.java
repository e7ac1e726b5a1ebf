package org.peerdirect.mlx4;

import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.umem.IbUmem;

/**
 * {@code struct mlx4_ib_mr}. Lock rules: {@code this} guards {@link #released}; the engine's MPT
 * lock fences DMA against revocation.
 */
final class Mlx4Mr implements IbMrOps {

    private final Mlx4Pd pd;
    private final IbUmem umem;
    private final int key;
    private volatile boolean invalidated;
    private boolean released;

    Mlx4Mr(Mlx4Pd pd, IbUmem umem, int key) {
        this.pd = pd;
        this.umem = umem;
        this.key = key;
    }

    /**
     * The umem's invalidation function (called with the umem's mapping lock held): {@code HW2SW_MPT}
     * before this returns, so from now on every access through the key completes with a protection
     * or access error and none touches the memory.
     */
    void revokeOnInvalidate() {
        pd.ctx.dev.engine.hw2swMpt(key);
        invalidated = true;
    }

    /** The {@code mlx5r_handle_mkey_cleanup} order: revoke, stop the notifier, free the key, release the umem. */
    @Override
    public synchronized void deregMr() {
        if (released) {
            return;
        }
        released = true;
        pd.ctx.dev.engine.hw2swMpt(key);
        umem.stopInvalidationNotifier();
        pd.ctx.dev.engine.freeMpt(key);
        umem.release();
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
