package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.Collection;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Odp;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.jfr.Mlx5JfrEvents;

/**
 * mlx5_ib's on-demand paging ({@code drivers/infiniband/hw/mlx5/odp.c}) for one device: the
 * page-fault EQ, made with the first ODP MR ({@code mlx5r_odp_create_eq}, {@code MLX5_IB_NUM_PF_EQE}
 * entries), whose interrupt handler parses each {@code PAGE_FAULT} EQE into a {@link Pagefault} and
 * queues it on the fault work ({@code "mlx5_ib_page_fault"}); the work resolves it
 * ({@code mlx5_ib_mr_wqe_pfault_handler} reading the WQE from the user's queue and faulting each
 * data segment, {@code mlx5_ib_mr_rdma_pfault_handler} faulting the responder's range) and always
 * ends with {@code PAGE_FAULT_RESUME}, with the error flag when a segment could not be mapped.
 *
 * <p>The mkeys whose faults the driver serves live in one table, {@link #odpMkeys}
 * ({@code dev->odp_mkeys}, keyed by mkey index): explicit and implicit ODP MRs and dynamic dma-buf
 * MRs alike, each an {@link OdpMkey} with its type and its use count. Each MR kind stores itself
 * there when it is ready ({@link #storeOdpMkey}) and leaves at deregistration
 * ({@link #eraseOdpMkey}: the key erased first, then the wait for the count to drop,
 * {@code mlx5r_deref_wait_odp_mkey}); a fault finds the key and holds the count while it works
 * ({@link #findOdpMkey}, {@code mlx5r_deref_odp_mkey} after), so no fault touches an MR being torn
 * down and no global grace period is needed. The fault path switches on the mkey type and leaves
 * the rest to the MR ({@code pagefault_mr} branching on {@code is_dmabuf} and
 * {@code is_implicit_odp} is each kind's own {@link OdpMkey#pagefault}).
 *
 * <p>Threads: the EQ handler runs on the core's interrupt thread and only queues; the work runs
 * on one platform thread (the kernel's ordered high-priority work queue). A key not in
 * {@link #odpMkeys} (a pinned MR, or a key the application got wrong) counts as mapped, as the
 * kernel's handler does: the device then fails the access as a protection error if it was bad.
 */
final class Mlx5Odp {

    /** {@code MLX5_IB_NUM_PF_EQE}. */
    static final int NUM_PF_EQE = 0x1000;
    /** {@code MAX_PREFETCH_LEN}: what the RDMA handler prefetches after a fault with no operation length. */
    static final long MAX_PREFETCH_LEN = 4L << 20;

    /**
     * {@code enum mlx5_mkey_type} as far as the fault path meets it. Not built:
     * {@code MLX5_MKEY_MW} and {@code MLX5_MKEY_INDIRECT_DEVX}, whose faults walk the KLM list
     * {@code QUERY_MKEY} returns (the model has neither memory windows nor DEVX), and
     * {@code MLX5_MKEY_NULL} (the memory page-fault scheme's private null mkey).
     */
    enum MkeyType {
        /** {@code MLX5_MKEY_MR}: an MR the device faults on by its own key (explicit, implicit, dma-buf). */
        MR,
        /**
         * {@code MLX5_MKEY_IMPLICIT_CHILD}: an implicit MR's child. The device reaches it through
         * its parent's KSM entry and faults under the parent's key, so the WQE and RDMA fault
         * scheme never stores it in {@code odp_mkeys} (the kernel does only with
         * {@code mem_page_fault}, which the model does not report); it still waits for its users.
         */
        IMPLICIT_CHILD
    }

    /**
     * {@code struct mlx5_ib_mkey} as the fault and prefetch paths see an MR of {@link #odpMkeys}:
     * its key, its type and its use count ({@code usecount}, with the wait of its destruction), and
     * {@code pagefault_mr}, which each MR kind answers for itself.
     */
    interface OdpMkey {
        int mkey();

        MkeyType type();

        /** {@code mmkey.usecount} and {@code mmkey.wait}. */
        Mlx5MkeyUse usecount();

        /** Takes a use ({@code refcount_inc} of a found key): false once deregistration began. */
        default boolean get() {
            return usecount().get();
        }

        /** {@code mlx5r_deref_odp_mkey}. */
        default void put() {
            usecount().put();
        }

        Mlx5IbPd pd();

        boolean writable();

        /** The MR's restrack counters. */
        Mlx5OdpMr.Stats stats();

        /**
         * {@code pagefault_mr}: maps [va, va+len) and writes the device's translation; pages
         * mapped. {@code permissive} clips a range running past the MR (a device fault) instead of
         * refusing it (a prefetch the application asked for).
         */
        long pagefault(long va, long len, int flags, boolean permissive);

        /**
         * {@code pagefault_mr} for a device fault ({@code pagefault_single_data_segment}, and the
         * prefetch ahead of an RDMA fault): permissive.
         */
        default long pagefaultDevice(long va, long len, int flags) {
            return pagefault(va, len, flags, true);
        }
    }

    /** {@code struct mlx5_pagefault} as {@code mlx5_ib_eq_pf_process} parses it. */
    record Pagefault(int subtype, int type, int token, int wqNum, int wqeIndex, int rkey, long va, long opLen, int packetLen) {
    }

    final Mlx5IbDev dev;
    private final Mlx5CoreDev.GenericEq eq;
    private final ExecutorService wq;
    /** The background prefetches of {@code ibv_advise_mr} without FLUSH (the kernel's {@code system_unbound_wq}). */
    private final ExecutorService prefetchWq;
    /**
     * {@code dev->odp_mkeys}: mkey index → the MR whose faults the driver serves, in index order as
     * the xarray. The map's own atomicity is the {@code xa_lock}; a use count is taken only on an
     * entry found there, and an entry leaves before its destruction waits for the count.
     */
    private final ConcurrentSkipListMap<Integer, OdpMkey> odpMkeys = new ConcurrentSkipListMap<>();
    final AtomicLong faults = new AtomicLong();
    final AtomicLong faultErrors = new AtomicLong();
    final AtomicLong resumeFailures = new AtomicLong();
    final AtomicLong invalidations = new AtomicLong();
    /** Invalidations whose zapping UMR failed (a dead or vanished device): the pages were unmapped all the same. */
    final AtomicLong zapErrors = new AtomicLong();
    /** Pages made present by prefetch: {@code ibv_advise_mr} and the prefetch after an RDMA fault. */
    final AtomicLong prefetchedPages = new AtomicLong();
    final AtomicLong prefetchErrors = new AtomicLong();

    /** {@code mlx5r_odp_create_eq}. */
    Mlx5Odp(Mlx5IbDev dev) {
        this.dev = dev;
        this.wq = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().daemon().name(dev.name() + "-mlx5_ib_page_fault").unstarted(r));
        this.prefetchWq = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().daemon().name(dev.name() + "-mlx5_ib_prefetch").unstarted(r));
        try {
            this.eq = dev.core.createGenericEq("pf", NUM_PF_EQE, 1L << Eq.EVENT_PAGE_FAULT, this::eqe);
        } catch (RuntimeException e) {
            wq.shutdownNow();
            prefetchWq.shutdownNow();
            throw e;
        }
    }

    int eqn() {
        return eq.eqn();
    }

    /** {@code mlx5_ib_eq_pf_process}: one EQE (the interrupt thread): parsed and queued. */
    private void eqe(int type, int subType, MemorySegment d) {
        if (type != Eq.EVENT_PAGE_FAULT) {
            return;
        }
        Pagefault pf;
        if (subType == Odp.SUBTYPE_WQE) {
            int pftypeWq = d.get(BE32, Odp.EQE_WQE_PFTYPE_WQ);
            pf = new Pagefault(subType, pftypeWq >>> 24 & 7, d.get(BE32, Odp.EQE_WQE_TOKEN) & 0xff_ffff, pftypeWq & 0xff_ffff,
                    d.get(BE16, Odp.EQE_WQE_INDEX) & 0xffff, 0, 0, 0, d.get(BE16, Odp.EQE_WQE_PACKET_LENGTH) & 0xffff);
        } else if (subType == Odp.SUBTYPE_RDMA) {
            int pftypeToken = d.get(BE32, Odp.EQE_RDMA_PFTYPE_TOKEN);
            pf = new Pagefault(subType, pftypeToken >>> 24 & 7, pftypeToken & 0xff_ffff, 0, 0, d.get(BE32, Odp.EQE_RDMA_R_KEY),
                    d.get(BE64, Odp.EQE_RDMA_VA), d.get(BE32, Odp.EQE_RDMA_OP_LEN) & 0xffff_ffffL, d.get(BE16, Odp.EQE_RDMA_PACKET_LENGTH) & 0xffff);
        } else {
            System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, dev.name() + ": page fault of unknown subtype " + subType);
            return;
        }
        try {
            wq.execute(() -> pageFault(pf));
        } catch (RejectedExecutionException e) {
            // the EQ is being destroyed with the device: the device's objects go with it
        }
    }

    /** {@code mlx5_ib_pfault}: the work. Every fault ends in exactly one resume. */
    void pageFault(Pagefault pf) {
        faults.incrementAndGet();
        Mlx5JfrEvents.PageFault jfr = Mlx5JfrEvents.PageFault.start();
        boolean ok;
        long prefetchVa = 0;
        long prefetchLen = 0;
        int prefetchKey = 0;
        try {
            if (pf.subtype == Odp.SUBTYPE_WQE) {
                ok = wqeFault(pf);
            } else {
                long va = pf.va;
                long len = pf.opLen;
                if (len == 0) { // no operation length: the packet now, then prefetch ahead after the resume
                    len = Math.max(1, pf.packetLen);
                    prefetchKey = pf.rkey;
                    prefetchVa = va + len;
                    prefetchLen = MAX_PREFETCH_LEN;
                }
                ok = singleDataSegment(pf.rkey, va, len, 0) >= 0;
            }
        } catch (RuntimeException e) {
            ok = false;
        }
        if (!ok) {
            faultErrors.incrementAndGet();
        }
        // committed before the resume lets the device go on: whoever sees the access complete finds the event
        // recorded (a recording stopped right after the completion missed it when it was committed after)
        Mlx5JfrEvents.PageFault.done(jfr, dev.name(), pf.subtype == Odp.SUBTYPE_WQE, pf.type, pf.wqNum, pf.wqeIndex, pf.rkey, pf.va, pf.opLen,
                ok);
        resume(pf, !ok);
        if (ok && prefetchLen > 0) {
            try {
                singleDataSegment(prefetchKey, prefetchVa, prefetchLen, Mlx5OdpMr.PF_FLAGS_PREFETCH);
            } catch (RuntimeException e) {
                // best effort: -EAGAIN (a racing invalidation) or the end of the MR
            }
        }
    }

    /** {@code mlx5_ib_page_fault_resume}: the WQ number is the QP's (SRQ's) for a WQE fault, the token for an RDMA fault. */
    private void resume(Pagefault pf, boolean error) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.PAGE_FAULT_RESUME, 0, Odp.RESUME_IN_LEN);
        Odp.RESUME_ERROR.set(in, 0, error ? 1 : 0);
        Odp.RESUME_PAGE_FAULT_TYPE.set(in, 0, pf.type);
        Odp.RESUME_WQ_NUMBER.set(in, 0, pf.subtype == Odp.SUBTYPE_WQE ? pf.wqNum : pf.token);
        Odp.RESUME_FAULT_TOKEN.set(in, 0, pf.token);
        try {
            dev.cmd(() -> dev.core.exec(in, 16));
        } catch (KernelException e) {
            resumeFailures.incrementAndGet();
            System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING,
                    dev.name() + ": Failed to resolve the page fault on WQ 0x" + Integer.toHexString(pf.wqNum) + ": " + e.getMessage());
        }
    }

    /**
     * {@code mlx5_ib_mr_wqe_pfault_handler}: reads the WQE from the user's queue
     * ({@code mlx5_ib_read_wqe_sq}/{@code _rq}/{@code _srq}), skips its control, remote-address,
     * atomic or datagram segments, and faults every data segment; true when all are mapped.
     */
    private boolean wqeFault(Pagefault pf) {
        boolean requestor = (pf.type & Odp.PFAULT_REQUESTOR) != 0;
        if (pf.type == Odp.WQE_PF_TYPE_RMP) {
            Mlx5IbDev.SrqBuf s = dev.srqBufs.get(pf.wqNum);
            if (s == null) {
                return false;
            }
            byte[] w = s.pinned().read((long) (pf.wqeIndex & s.wqes() - 1) * s.stride(), s.stride());
            return dataSegments(MemorySegment.ofArray(w), Srq.NEXT_SEG_SIZE, w.length, 0);
        }
        Mlx5IbDev.QpBuf q = dev.qpBufs.get(pf.wqNum);
        if (q == null) {
            return false;
        }
        if (!requestor) {
            if (q.rqStride() == 0) {
                return false;
            }
            byte[] w = q.pinned().read((long) (pf.wqeIndex & q.rqWqes() - 1) * q.rqStride(), q.rqStride());
            return dataSegments(MemorySegment.ofArray(w), 0, w.length, 0);
        }
        // the send WQE: its control segment says how many 16-byte segments follow, across basic blocks that wrap
        int bb = pf.wqeIndex & q.sqBbs() - 1;
        MemorySegment first = MemorySegment.ofArray(q.pinned().read(q.sqOffset() + (long) bb * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB));
        int ds = first.get(BE32, Qp.CTRL_QPN_DS) & 0x3f;
        int opcode = first.get(BE32, Qp.CTRL_OPMOD_IDX_OPCODE) & 0xff;
        int bytes = ds * Qp.DS_SIZE;
        if (ds == 0 || bytes > q.sqBbs() * Qp.SEND_WQE_BB) {
            return false;
        }
        byte[] w = new byte[(bytes + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB * Qp.SEND_WQE_BB];
        for (int i = 0; i * Qp.SEND_WQE_BB < bytes; i++) {
            byte[] b = q.pinned().read(q.sqOffset() + (long) ((bb + i) & q.sqBbs() - 1) * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
            System.arraycopy(b, 0, w, i * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
        }
        int off = Qp.DS_SIZE; // the control segment
        if (q.ud()) {
            off += Qp.AV_SIZE;
        } else if (opcode == Wqe.OP_RDMA_WRITE || opcode == Wqe.OP_RDMA_WRITE_IMM || opcode == Wqe.OP_RDMA_READ) {
            off += Qp.DS_SIZE;
        } else if (opcode == Wqe.OP_ATOMIC_CS || opcode == Wqe.OP_ATOMIC_FA) {
            off += 2 * Qp.DS_SIZE;
        }
        // a READ or an atomic writes the local buffer: the requester's type says so (REQ_READ_OR_ATOMIC)
        return dataSegments(MemorySegment.ofArray(w), off, bytes, 0);
    }

    /** {@code pagefault_data_segments}: each segment from {@code off} to {@code end}; an inline segment is skipped. */
    private boolean dataSegments(MemorySegment w, int off, int end, int flags) {
        boolean ok = true;
        while (off + Qp.DS_SIZE <= end) {
            int bc = w.get(BE32, off + Qp.DATA_BYTE_COUNT);
            if ((bc & Qp.INLINE_SEG) != 0) {
                int n = bc & ~Qp.INLINE_SEG;
                off += (4 + n + Qp.DS_SIZE - 1) & ~(Qp.DS_SIZE - 1);
                continue;
            }
            int lkey = w.get(BE32, off + Qp.DATA_LKEY);
            long addr = w.get(BE64, off + Qp.DATA_ADDR);
            off += Qp.DS_SIZE;
            if (lkey == Qp.INVALID_LKEY) {
                break; // the end of a receive WQE's list
            }
            long len = bc == 0 ? 1L << 31 : bc & 0xffff_ffffL; // byte count 0 means 2 GiB
            if (singleDataSegment(lkey, addr, len, flags) < 0) {
                ok = false;
            }
        }
        return ok;
    }

    /**
     * {@code pagefault_single_data_segment}: the key's mkey under its use count
     * ({@link #findOdpMkey}), faulted over [va, va+len) as its type says. Pages mapped, or -1 when
     * the range cannot be mapped (outside the MR, not accessible, a stale key, the MR gone). A key
     * that names no mkey of {@code odp_mkeys} counts as mapped ("skipping non ODP MR").
     */
    long singleDataSegment(int key, long va, long len, int flags) {
        OdpMkey m;
        try {
            m = findOdpMkey(key);
        } catch (KernelException e) {
            return -1; // a stale key, or the MR is being deregistered
        }
        if (m == null) {
            return len; // not an ODP mkey: the device's own checks decide
        }
        try {
            return switch (m.type()) {
                case MR -> m.pagefaultDevice(va, len, flags);
                // never stored by this fault scheme (see MkeyType): the kernel's "wrong mkey type"
                case IMPLICIT_CHILD -> -1;
            };
        } catch (KernelException e) {
            return -1;
        } finally {
            m.put();
        }
    }

    /**
     * {@code mlx5_ib_advise_mr_prefetch}: every lkey is checked now and its MR held by its use
     * count ({@code get_prefetchable_mr}); with {@link IbvPd#ADVISE_MR_FLAG_FLUSH} the ranges are
     * faulted before returning and the first error is thrown, otherwise the work is queued
     * ({@code system_unbound_wq}'s part) and fails silently, counted in {@link #prefetchErrors}. A
     * deregistration waits for the queued work through the use counts.
     */
    void adviseMr(Mlx5IbPd pd, int advice, int flags, IbvSge[] sgList) {
        int pfFlags = Mlx5OdpMr.PF_FLAGS_PREFETCH | (advice == IbvPd.ADVISE_MR_ADVICE_PREFETCH ? Mlx5OdpMr.PF_FLAGS_DOWNGRADE : 0)
                | (advice == IbvPd.ADVISE_MR_ADVICE_PREFETCH_NO_FAULT ? Mlx5OdpMr.PF_FLAGS_SNAPSHOT : 0);
        OdpMkey[] mrs = new OdpMkey[sgList.length];
        int held = 0;
        try {
            for (; held < sgList.length; held++) {
                mrs[held] = prefetchableMr(pd, advice, sgList[held].lkey);
            }
        } catch (RuntimeException e) {
            putAll(mrs, held);
            throw e;
        }
        if ((flags & IbvPd.ADVISE_MR_FLAG_FLUSH) != 0) {
            try {
                for (int i = 0; i < sgList.length; i++) {
                    prefetch(mrs[i], sgList[i], pfFlags);
                }
            } finally {
                putAll(mrs, mrs.length);
            }
            return;
        }
        try {
            prefetchWq.execute(() -> {
                try {
                    for (int i = 0; i < sgList.length; i++) {
                        try {
                            prefetch(mrs[i], sgList[i], pfFlags);
                        } catch (RuntimeException e) {
                            prefetchErrors.incrementAndGet(); // best effort: allowed to fail
                        }
                    }
                } finally {
                    putAll(mrs, mrs.length);
                }
            });
        } catch (RejectedExecutionException e) {
            putAll(mrs, mrs.length);
            throw new KernelException(Errno.EIO, "ibv_advise_mr: " + dev.name() + " is going away");
        }
    }

    private static void prefetch(OdpMkey mr, IbvSge sge, int pfFlags) {
        long len = sge.length & 0xffff_ffffL;
        if (len > 0) {
            mr.pagefault(sge.addr, len, pfFlags, false);
        }
    }

    private static void putAll(OdpMkey[] mrs, int n) {
        for (int i = 0; i < n; i++) {
            mrs[i].put();
        }
    }

    /** ENOENT of {@code ibv_advise_mr}: {@code lkey} names no ODP MR of {@code dev} (also before its first ODP MR). */
    static KernelException noOdpMr(Mlx5IbDev dev, int lkey) {
        return new KernelException(Errno.ENOENT, String.format("ibv_advise_mr: lkey 0x%x names no ODP MR (nor dynamic dma-buf MR) of %s", lkey, dev.name()));
    }

    /**
     * {@code get_prefetchable_mr}: the MR of {@code lkey} in {@code odp_mkeys} (an ODP or dynamic
     * dma-buf MR), held by its use count.
     *
     * @throws KernelException ENOENT no ODP MR has the key (or it is being deregistered); EPERM
     *         the MR is of another PD, or the advice wants write on an MR without local write
     */
    private OdpMkey prefetchableMr(Mlx5IbPd pd, int advice, int lkey) {
        OdpMkey mr;
        try {
            mr = findOdpMkey(lkey);
        } catch (KernelException e) {
            mr = null;
        }
        if (mr == null) {
            throw noOdpMr(dev, lkey);
        }
        if (mr.type() != MkeyType.MR) {
            mr.put();
            throw noOdpMr(dev, lkey);
        }
        if (mr.pd() != pd) {
            mr.put();
            throw new KernelException(Errno.EPERM, String.format("ibv_advise_mr: lkey 0x%x is an MR of another PD", lkey));
        }
        if (advice == IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE && !mr.writable()) {
            mr.put();
            throw new KernelException(Errno.EPERM,
                    String.format("ibv_advise_mr: PREFETCH_WRITE on lkey 0x%x, an MR without IBV_ACCESS_LOCAL_WRITE", lkey));
        }
        return mr;
    }

    /**
     * {@code find_odp_mkey}: the mkey {@code key}'s index holds in {@code odp_mkeys}, its use count
     * taken; null when the index holds none (not an ODP key: the caller decides what that means).
     *
     * @throws KernelException EFAULT when the index holds another key (a stale key byte:
     *         {@code mkey_is_eq}) or the mkey's deregistration began
     */
    OdpMkey findOdpMkey(int key) {
        OdpMkey m = odpMkeys.get(Mkey.mkeyToIdx(key));
        if (m == null) {
            return null;
        }
        if (m.mkey() != key || !m.get()) {
            throw new KernelException(Errno.EFAULT, String.format("%s: mkey 0x%x is not in odp_mkeys (a stale key, or being deregistered)",
                    dev.name(), key));
        }
        return m;
    }

    /**
     * {@code mlx5r_store_odp_mkey}: {@code m} (an MR, ready for faults) in {@code odp_mkeys} under
     * its index. Its use count is the one it was made with.
     */
    void storeOdpMkey(OdpMkey m) {
        if (m.type() != MkeyType.MR) {
            throw new IllegalArgumentException(String.format("mkey 0x%x of type %s: only MRs fault by their own key here", m.mkey(), m.type()));
        }
        odpMkeys.put(Mkey.mkeyToIdx(m.mkey()), m);
    }

    /**
     * The start of an ODP mkey's destruction: out of {@code odp_mkeys} ({@code xa_erase}, where
     * it is stored) so no new fault finds it, then {@code mlx5r_deref_wait_odp_mkey}: the wait for
     * the faults and prefetches still using it. Called once, by the MR's deregistration.
     */
    void eraseOdpMkey(OdpMkey m) {
        if (m.type() == MkeyType.MR) {
            odpMkeys.remove(Mkey.mkeyToIdx(m.mkey()), m);
        }
        m.usecount().derefWait(m.mkey());
    }

    /** The mkeys of {@code odp_mkeys} now, in index order (tools: {@code odp_stats}, sysfs). */
    Collection<OdpMkey> odpMkeys() {
        return odpMkeys.values();
    }

    /** The entry of {@code key}'s index if it is this key and of {@code kind}, without a use count (tests and tools), else null. */
    <T extends OdpMkey> T odpMkey(int key, Class<T> kind) {
        OdpMkey m = odpMkeys.get(Mkey.mkeyToIdx(key));
        return m != null && m.mkey() == key && kind.isInstance(m) ? kind.cast(m) : null;
    }

    /** Queues {@code work} on the background queue ({@code system_unbound_wq}'s part). */
    void background(Runnable work) {
        prefetchWq.execute(work);
    }

    /**
     * The device's null mkey ({@code mlx5_cmd_null_mkey}: {@code QUERY_SPECIAL_CONTEXTS}), asked
     * once, when the first implicit MR needs it.
     */
    synchronized int nullMkey() {
        if (nullMkey < 0) {
            MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_SPECIAL_CONTEXTS, 0, 16);
            MemorySegment out = dev.cmd(() -> dev.core.exec(in, Mkey.SPECIAL_CONTEXTS_OUT_LEN));
            nullMkey = out.get(BE32, Mkey.SPECIAL_OUT_NULL_MKEY) & 0xffff_ffffL;
        }
        return (int) nullMkey;
    }

    /** Guarded by this: the null mkey once asked, else -1. */
    private long nullMkey = -1;

    /**
     * {@code mlx5r_odp_destroy_eq}: the EQ first (no new fault is queued), then the fault work and
     * the background prefetches drained. Idempotent.
     */
    void destroy() {
        eq.destroy();
        drain(wq);
        drain(prefetchWq);
    }

    private static void drain(ExecutorService q) {
        q.shutdown();
        try {
            if (!q.awaitTermination(10, TimeUnit.SECONDS)) {
                q.shutdownNow();
            }
        } catch (InterruptedException e) {
            q.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }

    String describe() {
        return String.format("page-fault EQ %d, faults %d (errors %d, resume failures %d), invalidations %d (zap errors %d), prefetched pages %d (background errors %d), odp_mkeys %d",
                eq.eqn(), faults.get(), faultErrors.get(), resumeFailures.get(), invalidations.get(), zapErrors.get(), prefetchedPages.get(), prefetchErrors.get(),
                odpMkeys.size());
    }
}
