package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentHashMap;
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

/**
 * mlx5_ib's on-demand paging ({@code drivers/infiniband/hw/mlx5/odp.c}) for one device: the
 * page-fault EQ, made with the first ODP MR ({@code mlx5r_odp_create_eq}, {@code MLX5_IB_NUM_PF_EQE}
 * entries), whose interrupt handler parses each {@code PAGE_FAULT} EQE into a {@link Pagefault} and
 * queues it on the fault work ({@code "mlx5_ib_page_fault"}); the work resolves it
 * ({@code mlx5_ib_mr_wqe_pfault_handler} reading the WQE from the user's queue and faulting each
 * data segment, {@code mlx5_ib_mr_rdma_pfault_handler} faulting the responder's range) and always
 * ends with {@code PAGE_FAULT_RESUME}, with the error flag when a segment could not be mapped.
 *
 * <p>The ODP mkeys live in {@link #mkeys} ({@code dev->odp_mkeys}): a fault looks its key up there
 * and holds the MR's use count while it works ({@code mlx5r_deref_odp_mkey}); deregistration erases
 * the key first and waits for the count to drop ({@code mlx5r_deref_wait_odp_mkey}), so no fault
 * touches an MR being torn down and no global grace period is needed.
 *
 * <p>Threads: the EQ handler runs on the core's interrupt thread and only queues; the work runs
 * on one platform thread (the kernel's ordered high-priority work queue). A key not in
 * {@link #mkeys} (a pinned MR, or a key the application got wrong) counts as mapped, as the
 * kernel's handler does: the device then fails the access as a protection error if it was bad.
 */
final class Mlx5Odp {

    /** {@code MLX5_IB_NUM_PF_EQE}. */
    static final int NUM_PF_EQE = 0x1000;
    /** {@code MAX_PREFETCH_LEN}: what the RDMA handler prefetches after a fault with no operation length. */
    static final long MAX_PREFETCH_LEN = 4L << 20;

    /**
     * What the fault and prefetch paths need of an ODP key: an explicit ODP MR (or an implicit
     * MR's child) and an implicit MR alike ({@code pagefault_mr} branching on {@code is_implicit_odp}).
     */
    interface OdpMr {
        /** {@code mlx5r_get_odp_mkey}-like: false once deregistration began. */
        boolean get();

        /** {@code mlx5r_deref_odp_mkey}. */
        void put();

        Mlx5IbPd pd();

        boolean writable();

        int mkey();

        /** The MR's restrack counters. */
        Mlx5OdpMr.Stats stats();

        /** {@code pagefault_mr}: maps [va, va+len) and writes the device's translation; pages mapped. */
        long pagefault(long va, long len, int flags, boolean permissive);
    }

    /** {@code struct mlx5_pagefault} as {@code mlx5_ib_eq_pf_process} parses it. */
    record Pagefault(int subtype, int type, int token, int wqNum, int wqeIndex, int rkey, long va, long opLen, int packetLen) {
    }

    final Mlx5IbDev dev;
    private final Mlx5CoreDev.GenericEq eq;
    private final ExecutorService wq;
    /** The background prefetches of {@code ibv_advise_mr} without FLUSH (the kernel's {@code system_unbound_wq}). */
    private final ExecutorService prefetchWq;
    /** mkey index → the ODP MR ({@code odp_mkeys}). */
    final ConcurrentHashMap<Integer, Mlx5OdpMr> mkeys = new ConcurrentHashMap<>();
    /** mkey index → the implicit ODP MR (its children are reached through it, not by their own keys). */
    final ConcurrentHashMap<Integer, Mlx5ImplicitMr> implicitMkeys = new ConcurrentHashMap<>();
    /** mkey index → the dynamic dma-buf MR (the kernel keeps them in {@code odp_mkeys} too and branches on {@code is_dmabuf}). */
    final ConcurrentHashMap<Integer, Mlx5DmabufMr> dmabufMkeys = new ConcurrentHashMap<>();
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
     * {@code pagefault_single_data_segment}: the key's ODP MR under its use count, faulted over
     * [va, va+len). Pages mapped, or -1 when the range cannot be mapped (outside the MR, not
     * accessible, the MR gone). A key that names no ODP MR counts as mapped.
     */
    long singleDataSegment(int key, long va, long len, int flags) {
        OdpMr mr = odpMr(key);
        if (mr == null) {
            Mlx5DmabufMr d = dmabufMkeys.get(Mkey.mkeyToIdx(key));
            if (d != null) {
                return d.mkey != key ? -1 : d.fault(); // pagefault_dmabuf_mr: the whole buffer
            }
            return len; // not an ODP mkey: the device's own checks decide
        }
        if (mr.mkey() != key || !mr.get()) {
            return -1; // a stale key, or the MR is being deregistered
        }
        try {
            return mr.pagefault(va, len, flags, true);
        } catch (KernelException e) {
            return -1;
        } finally {
            mr.put();
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
        OdpMr[] mrs = new OdpMr[sgList.length];
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

    private static void prefetch(OdpMr mr, IbvSge sge, int pfFlags) {
        long len = sge.length & 0xffff_ffffL;
        if (len > 0) {
            mr.pagefault(sge.addr, len, pfFlags, false);
        }
    }

    private static void putAll(OdpMr[] mrs, int n) {
        for (int i = 0; i < n; i++) {
            mrs[i].put();
        }
    }

    /** ENOENT of {@code ibv_advise_mr}: {@code lkey} names no ODP MR of {@code dev} (also before its first ODP MR). */
    static KernelException noOdpMr(Mlx5IbDev dev, int lkey) {
        return new KernelException(Errno.ENOENT, String.format("ibv_advise_mr: lkey 0x%x names no ODP MR (nor dynamic dma-buf MR) of %s", lkey, dev.name()));
    }

    /**
     * {@code get_prefetchable_mr}: the ODP or dynamic dma-buf MR of {@code lkey} ({@code odp_mkeys}
     * holds both), held by its use count.
     *
     * @throws KernelException ENOENT no ODP MR has the key (or it is being deregistered); EPERM
     *         the MR is of another PD, or the advice wants write on an MR without local write
     */
    private OdpMr prefetchableMr(Mlx5IbPd pd, int advice, int lkey) {
        // odp_mkeys holds the dynamic dma-buf MRs too: a prefetch maps their whole buffer
        OdpMr mr = odpMr(lkey);
        if (mr == null) {
            mr = dmabufMkeys.get(Mkey.mkeyToIdx(lkey));
        }
        if (mr == null || mr.mkey() != lkey || !mr.get()) {
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

    /** The explicit or implicit ODP MR whose mkey index {@code key} names ({@code odp_mkeys}), or null. */
    private OdpMr odpMr(int key) {
        Mlx5OdpMr mr = mkeys.get(Mkey.mkeyToIdx(key));
        return mr != null ? mr : implicitMkeys.get(Mkey.mkeyToIdx(key));
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
        return String.format("page-fault EQ %d, faults %d (errors %d, resume failures %d), invalidations %d (zap errors %d), prefetched pages %d (background errors %d), ODP MRs %d",
                eq.eqn(), faults.get(), faultErrors.get(), resumeFailures.get(), invalidations.get(), zapErrors.get(), prefetchedPages.get(), prefetchErrors.get(),
                mkeys.size() + implicitMkeys.size());
    }
}
