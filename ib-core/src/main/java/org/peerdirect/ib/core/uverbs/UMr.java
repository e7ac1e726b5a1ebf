package org.peerdirect.ib.core.uverbs;

import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;

/**
 * {@code struct ib_mr}: the driver's MR. Deregistered once, by whoever comes first: the user, the
 * context's close, the process's exit, or the device's disassociation. {@code this} guards the flags.
 */
final class UMr implements IbvMr {
    final UPd pd;
    final IbMrOps ops;
    private final long addr;
    private final long length;
    private final int access;
    /** Registered from a dma-buf ({@code ibv_reg_dmabuf_mr}). */
    final boolean dmabuf;
    /** The driver's MR is gone (by anyone). */
    private boolean released;
    /** The user called dereg. */
    private boolean deregistered;

    UMr(UPd pd, IbMrOps ops, long addr, long length, int access, boolean dmabuf) {
        this.dmabuf = dmabuf;
        this.pd = pd;
        this.ops = ops;
        this.addr = addr;
        this.length = length;
        this.access = access;
    }

    @Override
    public int lkey() {
        return ops.lkey();
    }

    @Override
    public int rkey() {
        return ops.rkey();
    }

    @Override
    public long addr() {
        return addr;
    }

    @Override
    public long length() {
        return length;
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
        return ops.isPeer();
    }

    @Override
    public boolean invalidated() {
        return ops.invalidated();
    }

    /** Deregistered or released by anyone: true once the driver's MR is gone. */
    synchronized boolean released() {
        return released;
    }

    /** Releases the driver's MR if nobody did yet (disassociation, close). */
    synchronized void release() {
        if (!released) {
            released = true;
            ops.deregMr();
        }
    }

    /**
     * {@code ibv_dereg_mr}; idempotent, as pyverbs' {@code close()} and Java's {@code close}
     * convention are: a second call (or one after the context's close or the device's removal
     * released the MR) does nothing.
     */
    @Override
    public void dereg() {
        synchronized (this) {
            if (deregistered) {
                return;
            }
            deregistered = true;
        }
        try {
            release();
        } finally {
            pd.mrs.remove(this);
        }
    }

    @Override
    public String toString() {
        return ops.toString();
    }
}
