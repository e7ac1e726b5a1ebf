package org.peerdirect.mlx5.ib;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.provider.IbXrcdOps;

/**
 * {@code struct mlx5_ib_xrcd}: an XRC domain the firmware allocated ({@code mlx5_ib_alloc_xrcd} →
 * {@code ALLOC_XRCD}). The device's, not a context's: the core may keep it past the context
 * that opened it (a domain shared through a file).
 */
final class Mlx5Xrcd implements IbXrcdOps {
    final Mlx5IbDev dev;
    final int xrcdn;

    Mlx5Xrcd(Mlx5IbDev dev, int xrcdn) {
        this.dev = dev;
        this.xrcdn = xrcdn;
    }

    /** {@code mlx5_ib_dealloc_xrcd}; quiet on a device that went (its domains went with it). */
    @Override
    public void deallocXrcd() {
        dev.destroyQuietly(Mlx5Cmd.DEALLOC_XRCD, xrcdn);
    }

    @Override
    public String toString() {
        return dev.name() + " xrcd " + xrcdn;
    }
}
