package org.peerdirect.mlx5.ib;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.umem.IbUmem;

/**
 * {@code struct mlx5_ib_mr} of an MTT mkey created by command. A peer invalidation destroys the
 * mkey ({@code DESTROY_MKEY}: the firmware returns when no DMA through it is in flight) before the
 * callback returns; a later dereg only finishes the cleanup. Lock rules: {@code this} guards
 * {@link #destroyed} and {@link #released}.
 */
final class Mlx5IbMr implements IbMrOps {

    private final Mlx5IbPd pd;
    private final IbUmem umem;
    private final int mkey;
    private volatile boolean invalidated;
    private boolean destroyed;
    private boolean released;

    Mlx5IbMr(Mlx5IbPd pd, IbUmem umem, int mkey) {
        this.pd = pd;
        this.umem = umem;
        this.mkey = mkey;
    }

    private synchronized void destroyMkey() {
        if (!destroyed) {
            destroyed = true;
            pd.ctx.dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
        }
    }

    /** The umem's invalidation function: the key is gone before this returns. */
    void revokeOnInvalidate() {
        destroyMkey();
        invalidated = true;
    }

    /** {@code mlx5_ib_dereg_mr}: revoke, stop the notifier, release the umem. */
    @Override
    public void deregMr() {
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        destroyMkey();
        umem.stopInvalidationNotifier();
        umem.release();
    }

    @Override
    public int lkey() {
        return mkey;
    }

    @Override
    public int rkey() {
        return mkey;
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
        return String.format("MR mkey 0x%x %s%s", mkey, umem, invalidated ? " INVALIDATED" : "");
    }
}
