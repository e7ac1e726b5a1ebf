package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;

/** {@code struct ib_mr}'s driver part. */
@ConsumerType
public interface IbMrOps {
    int lkey();

    int rkey();

    /** True when a peer client supplies the memory. */
    boolean isPeer();

    /** True once a peer invalidation revoked the key. */
    boolean invalidated();

    /**
     * {@code dereg_mr}: revoke the key, stop the umem's notifier, free the key, release the umem.
     * Called once by the core (by the user, at context close, process exit, or disassociation);
     * it must succeed on a device whose hardware is gone.
     */
    void deregMr();
}
