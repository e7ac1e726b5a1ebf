package org.peerdirect.mlx5.ib;

import org.peerdirect.ib.core.provider.IbMrOps;

/**
 * An MR that is one mkey of this device's own memory (ODP, implicit ODP, dma-buf): the key is
 * both lkey and rkey, the memory is not a peer client's, and nothing revokes it behind the
 * application's back unless the kind says otherwise ({@link #invalidated}).
 */
interface Mlx5MkeyMr extends IbMrOps {

    int mkey();

    @Override
    default int lkey() {
        return mkey();
    }

    @Override
    default int rkey() {
        return mkey();
    }

    @Override
    default boolean isPeer() {
        return false;
    }

    @Override
    default boolean invalidated() {
        return false;
    }
}
