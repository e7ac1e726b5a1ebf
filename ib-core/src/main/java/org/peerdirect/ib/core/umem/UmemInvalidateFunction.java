package org.peerdirect.ib.core.umem;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * {@code umem_invalidate_func_t}: the driver's function the core calls when a peer client
 * invalidates the memory under a umem. When it returns, the device must no longer access that
 * memory (mlx5 revokes the mkey: later accesses complete with errors). Called with the umem's
 * mapping lock held, so it must not call back into the umem's notifier methods.
 */
@ConsumerType
@FunctionalInterface
public interface UmemInvalidateFunction {
    void invalidate(IbUmem umem);
}
