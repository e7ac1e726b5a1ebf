package org.peerdirect.ib.core.uverbs;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.provider.IbXrcdOps;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvXrcd;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * One opening of an XRC domain by a context ({@code ib_uverbs_open_xrcd}'s uobject). The
 * {@link Domain} is the device's {@code struct ib_xrcd}: what XRC SRQs and receive QPs use, and
 * what openings through the same file share ({@code xrcd_table}, keyed by the file here as by
 * the inode in the kernel).
 *
 * <p>Lock rules: {@link IbDevice#xrcdLock} (the kernel's {@code xrcd_tree_mutex}) guards the
 * device's table and every domain's {@link Domain#opens}, {@link Domain#users},
 * {@link Domain#dead} and {@link Domain#tgtQps} (the kernel's {@code tgt_qps_rwsem}); it is
 * taken without other core locks held and around driver calls to {@code alloc_xrcd} /
 * {@code dealloc_xrcd} only.
 */
final class UXrcd implements IbvXrcd {

    /** {@code struct ib_xrcd}: the driver's domain, its openings and its users. */
    static final class Domain {
        final IbDevice dev;
        final IbXrcdOps ops;
        /** The file it is shared through, or null (opened with fd -1: this context's alone). */
        final Object file;
        /** Openings alive (guarded by {@link IbDevice#xrcdLock}). */
        int opens;
        /** XRC SRQs and receive QPs created in it and not destroyed (guarded by {@link IbDevice#xrcdLock}). */
        int users;
        /** Deallocated (guarded by {@link IbDevice#xrcdLock}). */
        boolean dead;
        /** {@code xrcd->tgt_qps}: its XRC receive QPs by number (guarded by {@link IbDevice#xrcdLock}). */
        final Map<Integer, TgtQp> tgtQps = new HashMap<>();

        Domain(IbDevice dev, IbXrcdOps ops, Object file) {
            this.dev = dev;
            this.ops = ops;
            this.file = file;
        }

        /** An XRC SRQ or receive QP is created in the domain (the caller checked the opening alive). */
        void use() {
            dev.xrcdLock.lock();
            try {
                if (dead) {
                    throw new KernelException(Errno.EINVAL, dev.name() + ": the XRC domain was closed");
                }
                users++;
            } finally {
                dev.xrcdLock.unlock();
            }
        }

        /**
         * An XRC SRQ or receive QP of the domain is gone; a shared domain nobody opens any more
         * goes with its last user (the kernel leaves such a domain in its table until the inode is
         * opened again; here it is deallocated, so nothing outlives the last reference).
         */
        void release() {
            dev.xrcdLock.lock();
            try {
                users--;
                if (users == 0 && opens == 0 && file != null && !dead) {
                    deallocLocked();
                }
            } finally {
                dev.xrcdLock.unlock();
            }
        }

        /** Under {@link IbDevice#xrcdLock}: the driver's dealloc, and out of the device's table. */
        void deallocLocked() {
            assert dev.xrcdLock.isHeldByCurrentThread();
            dead = true;
            if (file != null) {
                dev.xrcds.remove(file, this);
            }
            try {
                ops.deallocXrcd();
            } catch (RuntimeException e) {
                if (!dev.removed) {
                    throw e;
                }
                // the hardware went first: the driver's teardown took the domain with it
            }
        }
    }

    /**
     * The real XRC receive QP ({@code qp->real_qp} of {@code create_xrc_qp_user}): the driver's
     * QP, which every user-visible handle ({@link UQp}, the creator's and each
     * {@code ibv_open_qp}'s, the kernel's {@code open_list}) refers to. It is the driver's
     * event handler ({@code __ib_shared_qp_event_handler}): an event reaches every handle's
     * context. It is destroyed with its last handle ({@code __ib_destroy_shared_qp}), and only
     * then releases its domain. {@link #handles} and membership in {@link Domain#tgtQps} change
     * under {@link IbDevice#xrcdLock}; events read the handles without it.
     */
    static final class TgtQp implements IbEvents {
        final Domain domain;
        /** Set once, right after the driver created the QP (before any handle exists). */
        IbQpOps ops;
        final List<UQp> handles = new CopyOnWriteArrayList<>();

        TgtQp(Domain domain) {
            this.domain = domain;
        }

        @Override
        public void event(IbvEventType type) {
            if (type != null && type.element() == IbvEventType.Element.QP) {
                for (UQp h : handles) {
                    h.ctx.asyncEvent(IbvAsyncEvent.of(type, h));
                }
            }
        }

        /** The creator's handle: the QP enters its domain's table. */
        void created(UQp handle) {
            domain.dev.xrcdLock.lock();
            try {
                handles.add(handle);
                domain.tgtQps.put(ops.qpNum(), this);
            } finally {
                domain.dev.xrcdLock.unlock();
            }
        }

        /**
         * Closes {@code handle} ({@code ib_close_qp}); true when it was the last, the QP then
         * out of its domain's table: the caller destroys it and releases the domain.
         */
        boolean close(UQp handle) {
            domain.dev.xrcdLock.lock();
            try {
                handles.remove(handle);
                if (!handles.isEmpty()) {
                    return false;
                }
                domain.tgtQps.remove(ops.qpNum(), this);
                return true;
            } finally {
                domain.dev.xrcdLock.unlock();
            }
        }
    }

    final UContext ctx;
    final Domain domain;
    private final AtomicBoolean closed = new AtomicBoolean();

    UXrcd(UContext ctx, Domain domain) {
        this.ctx = ctx;
        this.domain = domain;
    }

    @Override
    public IbvContext context() {
        return ctx;
    }

    /** The caller's opening is live: EINVAL after close. */
    void alive(String verb) {
        ctx.alive();
        if (closed.get()) {
            throw new KernelException(Errno.EINVAL, verb + ": the XRC domain was closed");
        }
    }

    /**
     * {@code ib_open_qp}: a new handle of this opening's context on the domain's XRC receive QP
     * {@code qpNum}; EINVAL when the domain has none of that number.
     */
    UQp openQp(int qpNum) {
        IbDevice dev = ctx.dev;
        org.peerdirect.ib.core.verbs.IbvQpInitAttr type = new org.peerdirect.ib.core.verbs.IbvQpInitAttr();
        type.qpType = org.peerdirect.ib.core.verbs.IbvQpType.XRC_RECV;
        type.xrcd = this;
        dev.xrcdLock.lock();
        try {
            TgtQp real = domain.tgtQps.get(qpNum);
            if (real == null || domain.dead) {
                throw new KernelException(Errno.EINVAL, String.format("ibv_open_qp: no XRC receive QP 0x%x in this XRC domain of %s", qpNum,
                        dev.name()));
            }
            UQp h = new UQp(ctx, null, type, real.ops, null, null, null, real);
            real.handles.add(h);
            return h;
        } finally {
            dev.xrcdLock.unlock();
        }
    }

    /**
     * {@code ib_uverbs_dealloc_xrcd}: an unshared domain in use is EBUSY (nothing changes); a
     * shared one loses this opening, and goes when no opening and no user is left.
     */
    @Override
    public void close() {
        IbDevice dev = ctx.dev;
        dev.xrcdLock.lock();
        try {
            if (closed.get()) {
                return;
            }
            if (domain.file == null && domain.users > 0) {
                throw new KernelException(Errno.EBUSY, "ibv_close_xrcd: the XRC domain is still used by " + domain.users
                        + " XRC SRQ(s) or receive QP(s)");
            }
            closed.set(true);
            ctx.xrcds.remove(this);
            domain.opens--;
            if (domain.opens == 0 && domain.users == 0 && !domain.dead) {
                domain.deallocLocked();
            }
        } finally {
            dev.xrcdLock.unlock();
        }
    }

    @Override
    public String toString() {
        return ctx.dev.name() + " XRC domain" + (domain.file != null ? " (shared through a file)" : "");
    }
}
