package org.peerdirect.mlx5.ib;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code struct mlx5_ib_mr} over a UMR-enabled MTT mkey: from the mkey cache (enabled by UMR) or
 * created by command ({@code reg_create}, peer MRs always). A peer invalidation revokes the mkey
 * by UMR ({@code mlx5r_umr_revoke_mr}: when it returns, no DMA through the mkey is in flight and
 * every later access ends in an error CQE) before the callback returns; a later dereg only
 * finishes the cleanup. Dereg ({@code mlx5r_handle_mkey_cleanup}) revokes a cacheable mkey and
 * gives it back to the cache, or destroys it.
 *
 * <p>Lock rules: {@code this} guards {@link #revoked}, {@link #destroyed} and {@link #released};
 * the UMR and the destroy command run under it, so an invalidation and a dereg never revoke or
 * destroy twice.
 */
final class Mlx5IbMr implements IbMrOps {

    private final Mlx5IbPd pd;
    private final IbUmem umem;
    private final int mkey;
    /** The cache key the mkey goes back to at dereg (its ndescs the mkey's MTT capacity); null when it may not (peer). */
    private final Mlx5MkeyCache.RbKey cacheKey;
    /** Taken from the cache (its entry counts it in use). */
    private final boolean fromCache;
    private volatile boolean invalidated;
    private boolean revoked;
    private boolean destroyed;
    private boolean released;

    Mlx5IbMr(Mlx5IbPd pd, IbUmem umem, int mkey, Mlx5MkeyCache.RbKey cacheKey, boolean fromCache) {
        this.pd = pd;
        this.umem = umem;
        this.mkey = mkey;
        this.cacheKey = cacheKey;
        this.fromCache = fromCache;
    }

    private synchronized void destroyMkey() {
        if (!destroyed) {
            destroyed = true;
            pd.ctx.dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
        }
    }

    /**
     * {@code mlx5r_umr_revoke_mr}, once. When the UMR cannot run (the device is dead or gone, or
     * the channel failed), the destroy command is the revocation left: either way no DMA through the
     * key is in flight when this returns.
     */
    private synchronized void revoke() {
        if (revoked || destroyed) {
            return;
        }
        revoked = true;
        try {
            pd.ctx.dev.umr().revokeMr(mkey);
        } catch (KernelException e) {
            destroyMkey();
        }
    }

    /** The umem's invalidation function ({@code mlx5_invalidate_umem}): the key is revoked before this returns. */
    void revokeOnInvalidate() {
        revoke();
        invalidated = true;
    }

    /** {@code mlx5_ib_dereg_mr}: revoke, stop the notifier, back to the cache or destroyed, release the umem. */
    @Override
    public void deregMr() {
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        revoke();
        umem.stopInvalidationNotifier();
        boolean stored;
        synchronized (this) {
            stored = !destroyed && cacheKey != null && pd.ctx.dev.mkeyCacheStore(mkey, cacheKey, fromCache);
        }
        if (!stored) {
            destroyMkey();
        }
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
        return String.format("MR mkey 0x%x %s%s%s", mkey, umem, fromCache ? " (from the mkey cache)" : "", invalidated ? " INVALIDATED" : "");
    }
}
