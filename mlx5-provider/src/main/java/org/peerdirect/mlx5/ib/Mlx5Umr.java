package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongUnaryOperator;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Umr;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Cq;

/**
 * mlx5_ib's UMR channel ({@code drivers/infiniband/hw/mlx5/umr.c}, {@code dev->umrc}): a PD, a CQ
 * and a QP of service type REG_UMR over the driver's own DMA pages and the core's UAR, through
 * which mkeys change without firmware commands: translations written, mkeys enabled and revoked.
 * {@link #postSendWait} posts one UMR WQE and returns when its CQE is there, so when
 * {@link #revokeMr} returns the device does no DMA through the mkey (the model's UMR waits for
 * transfers in flight, as the hardware's does).
 *
 * <p>Lock rules: {@link #postLock} ({@code umrc->sem} with one slot, since the kernel's 128 are a
 * throughput matter) is held from the WQE's write to its completion, so one UMR is in flight;
 * {@link #evLock} only pairs the completion event with the waiter. A failed UMR moves the QP to
 * ERR; {@link #recover} takes it back to RTS before the error is reported
 * ({@code mlx5r_umr_recover}).
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/hw/mlx5/umr.c">umr.c</a>
 */
final class Mlx5Umr {

    /** MTT entries one UMR writes: a page of translations ({@code MLX5_SPARE_UMR_CHUNK}, the kernel's fallback size). */
    static final int XLT_CHUNK = 4096 / 8;
    /** KSM entries one UMR writes: a page of them (16 bytes each, {@code struct mlx5_ksm}). */
    static final int KSM_CHUNK = 4096 / Mkey.KSM_SIZE;
    private static final int LOG_SQ = 6; // 64 basic blocks: one page
    private static final int LOG_CQ = 6; // 64 CQEs: one page
    private static final long QP_DBR = 64; // the QP's doorbell record after the CQ's, in one page
    private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final ValueLayout.OfLong NATIVE64 = ValueLayout.JAVA_LONG_UNALIGNED;

    private final Mlx5IbDev dev;
    private final Mlx5CoreDev core;
    final int pdn;
    private final int cqn;
    private final int qpn;
    private final int uar;
    private final Mlx5CoreDev.DmaPage sq;
    private final Mlx5CoreDev.DmaPage cq;
    private final Mlx5CoreDev.DmaPage dbr;
    private final Mlx5CoreDev.DmaPage xlt;
    private final ReentrantLock postLock = new ReentrantLock();
    private final ReentrantLock evLock = new ReentrantLock();
    private final Condition completed = evLock.newCondition();
    /** Guarded by postLock: the next basic block, the CQ's consumer index and arm sequence. */
    private int sqHead;
    private int ci;
    private int armSn;
    /** Guarded by evLock: completion events seen (the waiter re-checks the CQ after each). */
    private long events;
    private final MemorySegment wqe = MemorySegment.ofArray(new byte[3 * Qp.SEND_WQE_BB]);
    private boolean destroyed;
    final java.util.concurrent.atomic.AtomicLong posted = new java.util.concurrent.atomic.AtomicLong();

    /** {@code mlx5r_umr_resource_init}: PD, CQ, REG_UMR QP, then RST → INIT → RTR → RTS. */
    Mlx5Umr(Mlx5IbDev dev) {
        this.dev = dev;
        this.core = dev.core;
        this.uar = core.uarIndex();
        sq = core.allocCoherent();
        cq = core.allocCoherent();
        dbr = core.allocCoherent();
        xlt = core.allocCoherent();
        int pd = -1;
        int c = -1;
        int q = -1;
        try {
            pd = dev.execIndex(Mlx5CoreDev.input(Mlx5Cmd.ALLOC_PD, 0, 16), 16);
            for (int i = 0; i < 1 << LOG_CQ; i++) {
                cq.mem().set(ValueLayout.JAVA_BYTE, (long) i * Cq.CQE_SIZE + Cq.CQE_OP_OWN, Mlx5Cq.INIT_OP_OWN);
            }
            MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_CQ, 0, (int) Cq.CREATE_CQ_IN_PAS + 8);
            Cq.CQC_LOG_CQ_SIZE.set(in, Cq.CREATE_CQ_IN_CQC, LOG_CQ);
            Cq.CQC_UAR_PAGE.set(in, Cq.CREATE_CQ_IN_CQC, uar);
            Cq.CQC_C_EQN.set(in, Cq.CREATE_CQ_IN_CQC, core.compEqn());
            in.set(BE64, Cq.CREATE_CQ_IN_CQC + Cq.CQC_DBR_ADDR, dbr.iova());
            in.set(BE64, Cq.CREATE_CQ_IN_PAS, cq.iova());
            c = dev.execIndex(in, 16);
            final int cqnF = c;
            core.registerCq(c, new Mlx5CoreDev.CqEvents() {
                @Override
                public void completion() {
                    evLock.lock();
                    try {
                        events++;
                        completed.signalAll();
                    } finally {
                        evLock.unlock();
                    }
                }

                @Override
                public void error() {
                    System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.ERROR, dev.name() + ": UMR CQ 0x" + Integer.toHexString(cqnF)
                            + " overrun");
                }
            });
            in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_QP, 0, (int) Qp.CREATE_QP_IN_PAS + 8);
            long x = Qp.IN_QPC;
            Qp.QPC_ST.set(in, x, Qp.ST_REG_UMR);
            Qp.QPC_PM_STATE.set(in, x, Qp.PM_MIGRATED);
            Qp.QPC_PD.set(in, x, pd);
            Qp.QPC_RQ_TYPE.set(in, x, Qp.RQ_ZERO_LEN);
            Qp.QPC_LOG_SQ_SIZE.set(in, x, LOG_SQ);
            Qp.QPC_UAR_PAGE.set(in, x, uar);
            Qp.QPC_CQN_SND.set(in, x, c);
            Qp.QPC_CQN_RCV.set(in, x, c);
            Qp.QPC_PRI_VHCA_PORT_NUM.set(in, x, 1);
            in.set(BE64, x + Qp.QPC_DBR_ADDR, dbr.iova() + QP_DBR);
            in.set(BE64, Qp.CREATE_QP_IN_PAS, sq.iova());
            q = dev.execIndex(in, 16);
            this.pdn = pd;
            this.cqn = c;
            this.qpn = q;
            toRts();
        } catch (RuntimeException e) {
            if (q >= 0) {
                dev.destroyQuietly(Mlx5Cmd.DESTROY_QP, q);
            }
            if (c >= 0) {
                core.unregisterCq(c);
                dev.destroyQuietly(Mlx5Cmd.DESTROY_CQ, c);
            }
            if (pd >= 0) {
                dev.destroyQuietly(Mlx5Cmd.DEALLOC_PD, pd);
            }
            freePages();
            throw e;
        }
    }

    private void toRts() {
        for (int op : new int[] { Qp.RST2INIT_QP, Qp.INIT2RTR_QP, Qp.RTR2RTS_QP }) {
            MemorySegment in = Mlx5CoreDev.input(op, 0, Qp.MODIFY_IN_LEN);
            Pages.INDEX24.set(in, 0, qpn);
            Qp.QPC_PRI_VHCA_PORT_NUM.set(in, Qp.IN_QPC, 1);
            dev.cmd(() -> core.exec(in, 16));
        }
    }

    /**
     * {@code mlx5r_umr_recover}: after a failed UMR the QP is in ERR; back through RST to RTS, the
     * rings empty (the failed WQE was the only one, {@link #postLock} saw to that).
     */
    private void recover() {
        assert postLock.isHeldByCurrentThread();
        MemorySegment in = Mlx5CoreDev.input(Qp.QP_2RST, 0, 16);
        Pages.INDEX24.set(in, 0, qpn);
        dev.cmd(() -> core.exec(in, 16));
        sqHead = 0;
        dbr.mem().set(BE32, QP_DBR + Qp.DBR_SND, 0);
        toRts();
    }

    /**
     * {@code mlx5r_umr_revoke_mr}: the mkey is disabled ({@code free = 1}) and moved to the UMR
     * PD, so "the NIC will not be doing any DMA to the pages under the MR, and any DMA in progress
     * will be completed" when this returns; any access through it then fails with an error CQE.
     */
    void revokeMr(int mkey) {
        UmrWqeBuilder b = new UmrWqeBuilder(mkey, Umr.MASK_FREE | Umr.MASK_PD);
        b.free = true;
        b.pdn = pdn;
        postSendWait(b, 0, 0, null);
    }

    /**
     * {@code mlx5r_umr_update_mr_pas} with {@code MLX5_IB_UPD_XLT_ENABLE} and the attributes of a
     * registration: the {@code n} MTT entries {@code entry(i)} in chunks of {@link #XLT_CHUNK} (each
     * UMR writing its chunk at its offset), the last UMR setting start, length, page size, PD,
     * access and key byte and enabling the mkey ({@code free = 0}), checked free first.
     */
    void updateAndEnable(int mkey, int keyByte, int pd, long start, long length, int access, int n, LongUnaryOperator entry) {
        int done = 0;
        do {
            int k = Math.min(XLT_CHUNK, n - done);
            boolean last = done + k == n;
            UmrWqeBuilder b = new UmrWqeBuilder(mkey, last ? Umr.MASK_LEN | Umr.MASK_PAGE_SIZE | Umr.MASK_START_ADDR | Umr.MASK_PD
                    | Umr.MASK_KEY | Umr.MASK_FREE | Umr.MASK_LR | Umr.MASK_LW | Umr.MASK_RR | Umr.MASK_RW | Umr.MASK_A : 0);
            b.flags = Umr.FLAG_CHECK_FREE;
            b.free = false;
            b.pdn = pd;
            b.start = start;
            b.length = length;
            b.access = access;
            b.keyByte = keyByte;
            postSendWait(b, done / Umr.MTT_PER_OCTOWORD, octowords(k), mtt(done, k, entry));
            done += k;
        } while (done < n);
    }

    /**
     * {@code mlx5r_umr_update_xlt} with {@code MLX5_IB_UPD_XLT_ENABLE} for an indirect (KSM) mkey
     * created free with no entry pointing anywhere: enables it over the whole address space
     * ({@code length64}) with blocks of {@code 2^blockShift} bytes, the PD and the access, without
     * writing entries (implicit ODP's parent, {@code mlx5_ib_alloc_implicit_mr}).
     */
    void enableKsm(int mkey, int pd, int access, int blockShift) {
        UmrWqeBuilder b = new UmrWqeBuilder(mkey, Umr.MASK_LEN | Umr.MASK_PAGE_SIZE | Umr.MASK_START_ADDR | Umr.MASK_PD
                | Umr.MASK_KEY | Umr.MASK_FREE | Umr.MASK_LR | Umr.MASK_LW | Umr.MASK_RR | Umr.MASK_RW | Umr.MASK_A);
        b.flags = Umr.FLAG_CHECK_FREE;
        b.pdn = pd;
        b.access = access;
        b.length64 = true;
        b.pageShift = blockShift;
        postSendWait(b, 0, 0, null);
    }

    /**
     * {@code mlx5r_umr_update_xlt} with {@code MLX5_IB_UPD_XLT_INDIRECT} ({@code populate_klm}):
     * KSM entries [first, first+n) of an indirect mkey become {key(i), i << blockShift}, a page of
     * entries per UMR; {@code key} gives the target's key or the null mkey. When it returns, no
     * DMA through a replaced entry is in flight.
     */
    void updateKsm(int mkey, long first, long n, LongUnaryOperator key, int blockShift) {
        for (long at = first; at < first + n; at += KSM_CHUNK) {
            int k = (int) Math.min(KSM_CHUNK, first + n - at);
            long from = at;
            postSendWait(new UmrWqeBuilder(mkey, 0), from, k, page -> {
                for (int i = 0; i < k; i++) {
                    page.set(BE32, (long) Mkey.KSM_SIZE * i, 0);
                    page.set(BE32, (long) Mkey.KSM_SIZE * i + Mkey.KSM_KEY, (int) key.applyAsLong(from + i));
                    page.set(BE64, (long) Mkey.KSM_SIZE * i + Mkey.KSM_VA, (from + i) << blockShift);
                }
            });
        }
    }

    private static int octowords(int mttEntries) {
        return (mttEntries + Umr.MTT_PER_OCTOWORD - 1) / Umr.MTT_PER_OCTOWORD;
    }

    /** Fills the translation page with MTT entries {@code entry(first + i)}, i < n, and a zero in the last octoword's other half. */
    private static java.util.function.Consumer<MemorySegment> mtt(long first, int n, LongUnaryOperator entry) {
        return page -> {
            for (int i = 0; i < n; i++) {
                page.set(BE64, 8L * i, entry.applyAsLong(first + i));
            }
            if ((n & 1) != 0) {
                page.set(BE64, 8L * n, 0); // the octoword's other half: not present
            }
        };
    }

    /**
     * {@code mlx5r_umr_update_xlt} without {@code ENABLE} (the ODP fault, prefetch and zap paths):
     * MTT entries [first, first+n) become {@code entry(i)}, the block widened to whole octowords
     * ({@code MLX5_UMR_MTT_NUM_ENTRIES_ALIGNMENT}), so {@code entry} must give the current value of
     * a neighbour it does not change; nothing else of the mkey changes. When it returns, no DMA
     * through a replaced entry is in flight.
     */
    void updateXlt(int mkey, long first, long n, LongUnaryOperator entry) {
        long from = first & ~1L;
        long to = first + n + 1 & ~1L;
        for (long at = from; at < to; at += XLT_CHUNK) {
            int k = (int) Math.min(XLT_CHUNK, to - at);
            postSendWait(new UmrWqeBuilder(mkey, 0), at / Umr.MTT_PER_OCTOWORD, octowords(k), mtt(at, k, entry));
        }
    }

    /** What one UMR WQE says (the mkey segment's fields and the control segment's mask and flags). */
    static final class UmrWqeBuilder {
        final int mkey;
        final long mask;
        int flags;
        boolean free;
        int pdn;
        long start;
        long length;
        int access;
        int keyByte;
        /** {@code length64}: the mkey spans the whole address space from {@link #start}. */
        boolean length64;
        /** {@code log_page_size}: 12 for MTT mkeys of 4 KiB pages, the block size of a KSM mkey. */
        int pageShift = 12;

        UmrWqeBuilder(int mkey, long mask) {
            this.mkey = mkey;
            this.mask = mask;
            this.keyByte = mkey & 0xff;
        }
    }

    /**
     * {@code mlx5r_umr_post_send_wait}: builds the WQE (control segment with the mkey as immediate,
     * UMR control segment, mkey segment, and a data segment over the translation page when
     * {@code octowords > 0}, which {@code fill} writes, from octoword {@code offset} of the mkey's
     * translations), rings the doorbell, and waits (bounded) for the CQE. An error CQE recovers
     * the QP and fails with the syndrome; a device that is gone or silent fails with EIO.
     */
    private void postSendWait(UmrWqeBuilder b, long offset, int octowords, java.util.function.Consumer<MemorySegment> fill) {
        postLock.lock();
        try {
            if (destroyed) {
                throw new KernelException(Errno.EIO, dev.name() + ": the UMR QP is destroyed");
            }
            if (octowords > 0) {
                fill.accept(xlt.mem());
            }
            wqe.fill((byte) 0);
            int ds = octowords > 0 ? Umr.DS_WITH_DATA : Umr.DS_NO_DATA;
            wqe.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, (sqHead & 0xffff) << 8 | Wqe.OP_UMR);
            wqe.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | ds);
            wqe.set(ValueLayout.JAVA_BYTE, Qp.CTRL_FM_CE_SE, (byte) Qp.CTRL_CQ_UPDATE);
            wqe.set(BE32, Qp.CTRL_IMM, b.mkey);
            long u = Umr.CTRL_SEG;
            int flags = b.flags;
            if (octowords > 0) {
                wqe.set(BE16, u + Umr.XLT_OCTOWORDS, (short) octowords);
                wqe.set(BE16, u + Umr.XLT_OFFSET, (short) offset);
                wqe.set(BE32, u + Umr.XLT_OFFSET_47_16, (int) (offset >>> 16));
                flags |= Umr.FLAG_TRANSLATION_OFFSET_EN;
                wqe.set(BE32, Umr.DATA_SEG + Qp.DATA_BYTE_COUNT, 16 * octowords);
                wqe.set(BE32, Umr.DATA_SEG + Qp.DATA_LKEY, 0); // the reserved lkey: bus addresses (ib_dev.local_dma_lkey of mlx5_ib)
                wqe.set(BE64, Umr.DATA_SEG + Qp.DATA_ADDR, xlt.iova());
            }
            wqe.set(ValueLayout.JAVA_BYTE, u + Umr.FLAGS, (byte) flags);
            wqe.set(BE64, u + Umr.MKEY_MASK, b.mask);
            long m = Umr.MKEY_SEG;
            Mkey.MKC_FREE.set(wqe, m, b.free ? 1 : 0);
            Mkey.MKC_LR.set(wqe, m, 1);
            Mkey.MKC_LW.set(wqe, m, (b.access & IbAccess.LOCAL_WRITE) != 0 ? 1 : 0);
            Mkey.MKC_RR.set(wqe, m, (b.access & IbAccess.REMOTE_READ) != 0 ? 1 : 0);
            Mkey.MKC_RW.set(wqe, m, (b.access & IbAccess.REMOTE_WRITE) != 0 ? 1 : 0);
            Mkey.MKC_A.set(wqe, m, (b.access & IbAccess.REMOTE_ATOMIC) != 0 ? 1 : 0);
            Mkey.MKC_QPN.set(wqe, m, 0xff_ffff);
            Mkey.MKC_MKEY_7_0.set(wqe, m, b.keyByte);
            Mkey.MKC_PD.set(wqe, m, b.pdn);
            wqe.set(BE64, m + Mkey.MKC_START_ADDR, b.start);
            wqe.set(BE64, m + Mkey.MKC_LEN, b.length);
            Mkey.MKC_LENGTH64.set(wqe, m, b.length64 ? 1 : 0);
            Mkey.MKC_LOG_PAGE_SIZE.set(wqe, m, b.pageShift);
            int bbs = (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
            int ctrlBb = sqHead;
            for (int i = 0; i < bbs; i++) {
                MemorySegment.copy(wqe, (long) i * Qp.SEND_WQE_BB, sq.mem(), (long) ((ctrlBb + i) & (1 << LOG_SQ) - 1) * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
            }
            sqHead += bbs;
            VarHandle.releaseFence();
            dbr.mem().set(BE32, QP_DBR + Qp.DBR_SND, sqHead & 0xffff);
            VarHandle.fullFence();
            core.function().write64(0, ((long) uar << 12) + Qp.UAR_BF_OFFSET, wqe.get(NATIVE64, 0));
            posted.incrementAndGet();
            awaitCqe(ctrlBb);
        } finally {
            postLock.unlock();
        }
    }

    /** Waits for the CQE of the WQE at {@code ctrlBb}: polls, arms, re-polls, then sleeps on the completion event; at most {@link #WAIT_NANOS}. */
    private void awaitCqe(int ctrlBb) {
        long deadline = System.nanoTime() + WAIT_NANOS;
        for (;;) {
            long seen;
            evLock.lock();
            try {
                seen = events;
            } finally {
                evLock.unlock();
            }
            if (pollOne(ctrlBb)) {
                return;
            }
            if (!core.isUp()) {
                throw new KernelException(Errno.EIO, dev.name() + ": UMR on a device that is not up (" + core.whyDown() + ")");
            }
            arm();
            if (pollOne(ctrlBb)) {
                return;
            }
            evLock.lock();
            try {
                long left = deadline - System.nanoTime();
                while (events == seen && left > 0) {
                    left = completed.awaitNanos(Math.min(left, TimeUnit.MILLISECONDS.toNanos(50))); // re-checks the device's health too
                    if (!core.isUp()) {
                        break;
                    }
                }
                if (events == seen && System.nanoTime() - deadline >= 0) {
                    throw new KernelException(Errno.EIO, String.format("%s: UMR WQE %d on QP 0x%x: no completion in %d s", dev.name(), ctrlBb, qpn,
                            TimeUnit.NANOSECONDS.toSeconds(WAIT_NANOS)));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KernelException(Errno.EIO, dev.name() + ": interrupted waiting for a UMR");
            } finally {
                evLock.unlock();
            }
        }
    }

    /** One CQE if there is one: true when it completed the WQE; an error CQE recovers the QP and throws. */
    private boolean pollOne(int ctrlBb) {
        long o = (long) (ci & (1 << LOG_CQ) - 1) * Cq.CQE_SIZE;
        MemorySegment ring = cq.mem();
        int opOwn = (byte) BYTE.getAcquire(ring, o + Cq.CQE_OP_OWN) & 0xff;
        int opcode = opOwn >>> 4;
        if (!Mlx5Cq.swOwned(opOwn, ci, LOG_CQ)) {
            return false;
        }
        int syndrome = ring.get(ValueLayout.JAVA_BYTE, o + Cq.CQE_SYNDROME) & 0xff;
        int counter = ring.get(BE16, o + Cq.CQE_WQE_COUNTER) & 0xffff;
        ci++;
        VarHandle.releaseFence();
        dbr.mem().set(BE32, Cq.DBR_SET_CI, ci & 0xff_ffff);
        if (opcode == Cq.CQE_REQ_ERR || opcode == Cq.CQE_RESP_ERR) {
            recover();
            String what = switch (syndrome) {
                case Cq.SYND_LOCAL_PROT -> "local protection: no such UMR-enabled mkey, a failed free check, or a list the device cannot read";
                case Cq.SYND_LOCAL_QP_OP -> "local QP operation: more than the mkey's MTT holds, or a bad page size or entry";
                case Cq.SYND_LOCAL_LENGTH -> "local length: the list is shorter than its entries";
                case Cq.SYND_WR_FLUSH -> "flushed: the UMR QP was in error";
                default -> "unexpected";
            };
            throw new KernelException(syndrome == Cq.SYND_LOCAL_PROT ? Errno.EPERM : Errno.EIO, String.format(
                    "%s: UMR WQE %d failed: CQE syndrome 0x%x (%s)", dev.name(), counter, syndrome, what));
        }
        if (counter != (ctrlBb & 0xffff)) {
            // one UMR is in flight (postLock): a CQE of another WQE is a device fault, not something to skip
            throw new KernelException(Errno.EIO, String.format("%s: UMR CQE for WQE %d while WQE %d was the one posted", dev.name(), counter,
                    ctrlBb & 0xffff));
        }
        return true;
    }

    /** {@code mlx5_arm_cq} for the UMR CQ. */
    private void arm() {
        int word = Mlx5Cq.armWord(armSn++, Cq.DB_REQ_NOT, ci);
        dbr.mem().set(BE32, Cq.DBR_ARM, word);
        VarHandle.fullFence();
        core.function().write64(0, ((long) uar << 12) + Cq.UAR_CQ_DOORBELL, Mlx5Cq.armDoorbell(word, cqn));
    }

    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    /** {@code mlx5r_umr_resource_cleanup}: QP, CQ, PD, then the pages (idempotent; quiet when the device is gone). */
    void destroy() {
        postLock.lock();
        try {
            if (destroyed) {
                return;
            }
            destroyed = true;
        } finally {
            postLock.unlock();
        }
        try {
            dev.destroyQuietly(Mlx5Cmd.DESTROY_QP, qpn);
            core.unregisterCq(cqn);
            dev.destroyQuietly(Mlx5Cmd.DESTROY_CQ, cqn);
            dev.destroyQuietly(Mlx5Cmd.DEALLOC_PD, pdn);
        } finally {
            freePages();
        }
    }

    private void freePages() {
        core.freeCoherent(sq);
        core.freeCoherent(cq);
        core.freeCoherent(dbr);
        core.freeCoherent(xlt);
    }
}
