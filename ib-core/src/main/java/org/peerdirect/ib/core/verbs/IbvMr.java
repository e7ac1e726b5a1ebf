package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_mr}. */
@ProviderType
public interface IbvMr {
    int lkey();

    int rkey();

    long addr();

    long length();

    int access();

    IbvPd pd();

    /** True when a peer client supplies the memory. */
    boolean isPeer();

    /** True when the peer client invalidated it: every access through its keys now fails. */
    boolean invalidated();

    /** {@code ibv_dereg_mr}; idempotent: a second call (or one after the context closed) does nothing. */
    void dereg();
}
