package org.peerdirect.mlx5.lib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * libmlx5's send queue of one QP ({@code qp->sq} and {@code qp->bf} of {@code struct mlx5_qp};
 * {@code _mlx5_post_send} and its segment builders {@code set_raddr_seg},
 * {@code set_atomic_seg}, {@code set_datagram_seg}, {@code set_data_ptr_seg},
 * {@code set_data_inl_seg} of {@code providers/mlx5/qp.c}): WQEs written as bytes into the send
 * part of the QP's buffer, in 64-byte basic blocks that wrap at its end; after a chain the
 * doorbell record, then BlueFlame. {@link #signalBits} is libmlx5's {@code sq_signal_bits}: the
 * control segment's CQ-update bit when the QP was created with {@code sq_sig_all}, ORed into every
 * WQE, so every request completes.
 *
 * <p>Lock rules: {@link #lock} (libmlx5's {@code sq.lock}) guards the ring's head, the wrids and
 * the BlueFlame offset; the tail moves on the poller's thread under the CQ's lock (volatile,
 * written by that one thread). No allocation per request.
 */
final class Mlx5Sq {

    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong NATIVE64 = ValueLayout.JAVA_LONG_UNALIGNED;

    private final Mlx5Qp qp;
    private final IbvQpType type;
    private final UserBuf buf;
    private final UarPage uar;
    private final int bfSize;
    private final int sqBbs;
    private final long sqOffset;
    private final int maxSendSge;
    private final int maxInline;
    /** {@code sq_signal_bits}: {@link Qp#CTRL_CQ_UPDATE} with {@code sq_sig_all}, else 0. */
    private final byte signalBits;
    final ReentrantLock lock = new ReentrantLock();
    /** Guarded by lock: the next basic block to write. */
    private int head;
    /** Basic blocks the device finished (the poller's, volatile for the poster). */
    private volatile int tail;
    /** BB index of a WQE's first block → the wr_id and the BB counter after the WQE. */
    private final long[] wrid;
    private final int[] next;
    private int bfOffset;
    /**
     * The largest WQE in basic blocks that goes by BlueFlame ({@code buf_size}), 0 when BlueFlame
     * is off ({@link Mlx5Qp#SHUT_UP_BF}).
     */
    private final int bfMaxBbs;
    /** BlueFlame staging for a WQE that wraps the ring or crosses a page ({@code mlx5_bf_copy} gathers its blocks). Guarded by lock. */
    private final MemorySegment bfStage;

    Mlx5Sq(Mlx5Qp qp, IbvQpType type, UserBuf buf, UarPage uar, int bfSize, int logSq, long sqOffset, int maxSendSge, int maxInline,
            boolean sqSigAll) {
        this.qp = qp;
        this.type = type;
        this.buf = buf;
        this.uar = uar;
        this.bfSize = bfSize;
        this.bfMaxBbs = Mlx5Qp.shutUpBf() ? 0 : bfSize / Qp.SEND_WQE_BB;
        this.bfStage = MemorySegment.ofArray(new long[bfSize / 8]);
        this.sqBbs = 1 << logSq;
        this.sqOffset = sqOffset;
        this.maxSendSge = maxSendSge;
        this.maxInline = maxInline;
        this.signalBits = (byte) (sqSigAll ? Qp.CTRL_CQ_UPDATE : 0);
        this.wrid = new long[sqBbs];
        this.next = new int[sqBbs];
    }

    /** The QP went to RESET: the hardware's counters restart, so do ours. Caller holds {@link #lock}. */
    void reset() {
        assert lock.isHeldByCurrentThread();
        head = 0;
        tail = 0;
        bfOffset = 0;
    }

    private static int opcode(IbvWrOpcode op) {
        return switch (op) {
            case RDMA_WRITE -> Wqe.OP_RDMA_WRITE;
            case RDMA_WRITE_WITH_IMM -> Wqe.OP_RDMA_WRITE_IMM;
            case SEND -> Wqe.OP_SEND;
            case SEND_WITH_IMM -> Wqe.OP_SEND_IMM;
            case RDMA_READ -> Wqe.OP_RDMA_READ;
            case ATOMIC_CMP_AND_SWP -> Wqe.OP_ATOMIC_CS;
            case ATOMIC_FETCH_AND_ADD -> Wqe.OP_ATOMIC_FA;
            case ATOMIC_WRITE -> Wqe.OP_ATOMIC_WRITE;
            case FLUSH -> Wqe.OP_FLUSH;
        };
    }

    /** The byte offset in the buffer of 16-byte segment {@code seg} of the WQE starting at basic block {@code bb}. */
    private long segOff(int bb, int seg) {
        return sqOffset + (long) ((bb + seg / 4) & sqBbs - 1) * Qp.SEND_WQE_BB + (seg & 3) * Qp.DS_SIZE;
    }

    /**
     * {@code _mlx5_post_send}: each request checked ({@link #checkSendWr}), its WQE
     * written from the producer's basic block on (control segment, then the XRC, datagram,
     * remote-address and atomic segments its type and opcode need, then the data), then one
     * doorbell for the chain, even when a later request is refused.
     */
    void postSend(IbvSendWr wr) {
        int posted = 0;
        int lastCtrlBb = 0;
        lock.lock();
        try {
            for (IbvSendWr w = wr; w != null; w = w.next) {
                checkSendWr(w);
                boolean xrc = type == IbvQpType.XRC_SEND;
                boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0;
                long total = w.totalLength();
                int op = opcode(w.opcode);
                int ds = 1 + (type == IbvQpType.UD ? Qp.AV_SIZE / Qp.DS_SIZE : 0) + (xrc ? 1 : 0)
                        + (op == Wqe.OP_SEND || op == Wqe.OP_SEND_IMM ? 0 : 1) + (Wqe.hasAtomicSegment(op) ? 1 : 0)
                        + (inl ? (int) ((4 + total + 15) / 16) : w.numSge);
                int bbs = (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
                if ((head - tail & 0xffff) + bbs > sqBbs) {
                    throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send queue full (%d basic blocks)", qp.qpn, sqBbs), w);
                }
                int bb = head;
                setCtrlSeg(w, bb, op, ds);
                int seg = 1;
                if (xrc) { // _mlx5_post_send: the XRC segment right after the control segment, then as RC
                    long so = segOff(bb, seg);
                    MemorySegment xp = buf.page(so);
                    xp.set(BE32, (so & 4095) + Qp.XRC_SRQN, w.remoteSrqn);
                    xp.set(BE32, (so & 4095) + 4, 0);
                    xp.set(BE64, (so & 4095) + 8, 0);
                    seg++;
                }
                if (type == IbvQpType.UD) {
                    setDatagramSeg(w, bb, seg);
                    seg += 3;
                } else if (op != Wqe.OP_SEND && op != Wqe.OP_SEND_IMM) {
                    seg = setRaddrAtomicSegs(w, op, bb, seg);
                }
                if (inl) {
                    writeInline(w, bb, seg, (int) total);
                } else {
                    for (int i = 0; i < w.numSge; i++, seg++) { // set_data_ptr_seg
                        long so = segOff(bb, seg);
                        MemorySegment dp = buf.page(so);
                        dp.set(BE32, (so & 4095) + Qp.DATA_BYTE_COUNT, w.sgList[i].length);
                        dp.set(BE32, (so & 4095) + Qp.DATA_LKEY, w.sgList[i].lkey);
                        dp.set(BE64, (so & 4095) + Qp.DATA_ADDR, w.sgList[i].addr);
                    }
                }
                wrid[bb & sqBbs - 1] = w.wrId;
                next[bb & sqBbs - 1] = bb + bbs & 0xffff;
                head = bb + bbs & 0xffff;
                lastCtrlBb = bb;
                posted++;
            }
        } finally {
            if (posted > 0) {
                ringSend(lastCtrlBb, posted);
            }
            lock.unlock();
        }
    }

    /**
     * What {@code _mlx5_post_send} refuses before writing a WQE, naming the problem: ENOMEM for
     * more SGEs than {@code max_send_sge} ("max gs exceeded") and inline data longer than
     * {@code max_inline_data} ({@code set_data_inl_seg}), as libmlx5; EINVAL for no opcode, a QP
     * not yet in RTS, a UD request that is not a SEND with an address
     * handle, an ATOMIC WRITE or FLUSH off RC/XRC or with SGEs, a FLUSH with a bad type, level or
     * length, inline data on an opcode that carries none. Caller holds the SQ lock.
     */
    private void checkSendWr(IbvSendWr w) {
        IbvQpState st = qp.state();
        if (w.opcode == null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has no opcode", qp.qpn, w.wrId), w);
        }
        if (st == IbvQpState.RESET || st == IbvQpState.INIT || st == IbvQpState.RTR) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in %s: ibv_post_send needs RTS", qp.qpn, st), w);
        }
        if (w.numSge < 0 || w.numSge > w.sgList.length) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has num_sge %d, its sg_list %d entries", qp.qpn,
                    w.wrId, w.numSge, w.sgList.length), w);
        }
        if (w.numSge > maxSendSge) { // "max gs exceeded": ENOMEM in _mlx5_post_send
            throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send request %d has %d SGEs, max_send_sge is %d", qp.qpn,
                    w.wrId, w.numSge, maxSendSge), w);
        }
        if (type == IbvQpType.UD && (w.opcode != IbvWrOpcode.SEND && w.opcode != IbvWrOpcode.SEND_WITH_IMM || w.ah == null)) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: a UD request must be a SEND with an address handle", qp.qpn), w);
        }
        boolean noData = w.opcode == IbvWrOpcode.ATOMIC_WRITE || w.opcode == IbvWrOpcode.FLUSH;
        boolean xrc = type == IbvQpType.XRC_SEND;
        if (noData && (type != IbvQpType.RC && !xrc || w.numSge != 0)) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: %s %s (RC only, no SGE: %s)", qp.qpn, w.opcode,
                    type != IbvQpType.RC && !xrc ? "on a " + type + " QP" : "with " + w.numSge + " SGEs",
                    w.opcode == IbvWrOpcode.FLUSH ? "the range is remoteAddr and flushLength" : "the 8 bytes in compareAdd"), w);
        }
        if (w.opcode == IbvWrOpcode.FLUSH && ((w.flushType & ~(IbvSendWr.FLUSH_GLOBAL | IbvSendWr.FLUSH_PERSISTENT)) != 0
                || w.flushLevel != IbvSendWr.FLUSH_RANGE && w.flushLevel != IbvSendWr.FLUSH_MR || w.flushLength < 0
                || w.flushLength > 0x8000_0000L)) {
            throw new PostException(Errno.EINVAL, String.format(
                    "QP 0x%x: FLUSH type 0x%x level %d length %d (type GLOBAL|PERSISTENT, level RANGE or MR, length 0..2^31)", qp.qpn,
                    w.flushType, w.flushLevel, w.flushLength), w);
        }
        boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0;
        long total = w.totalLength();
        if (inl && (w.opcode == IbvWrOpcode.RDMA_READ || w.opcode.isAtomic() || noData)) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: inline %s: the opcode carries no data of its own", qp.qpn,
                    w.opcode), w);
        }
        if (inl && total > maxInline) { // set_data_inl_seg: ENOMEM
            throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: inline %s of %d bytes (max_inline_data %d)", qp.qpn,
                    w.opcode, total, maxInline), w);
        }
    }

    /** The control segment of the WQE at basic block {@code bb}: index and opcode, QP and size, the flags, the immediate (or FLUSH's FETH word). */
    private void setCtrlSeg(IbvSendWr w, int bb, int op, int ds) {
        MemorySegment p = buf.page(segOff(bb, 0));
        long o = segOff(bb, 0) & 4095;
        p.set(BE32, o + Qp.CTRL_OPMOD_IDX_OPCODE, (bb & 0xffff) << 8 | op);
        p.set(BE32, o + Qp.CTRL_QPN_DS, qp.qpn << 8 | ds);
        p.set(ValueLayout.JAVA_BYTE, o + Qp.CTRL_SIGNATURE, (byte) 0);
        p.set(ValueLayout.JAVA_BYTE, o + Qp.CTRL_FM_CE_SE, (byte) (((w.sendFlags & IbvSendWr.SEND_SIGNALED) != 0 ? Qp.CTRL_CQ_UPDATE : signalBits)
                | ((w.sendFlags & IbvSendWr.SEND_SOLICITED) != 0 ? Qp.CTRL_SOLICITED : 0)
                | ((w.sendFlags & IbvSendWr.SEND_FENCE) != 0 ? Qp.CTRL_FENCE : 0)));
        // FLUSH: the FETH word (placement type, selectivity level) where an immediate would go
        p.set(BE32, o + Qp.CTRL_IMM, op == Wqe.OP_FLUSH ? w.flushLevel << Wqe.FLUSH_LEVEL_SHIFT | w.flushType : w.immData);
    }

    /** {@code set_datagram_seg}: the address vector, three segments from {@code seg}, cleared then filled from the AH. */
    private void setDatagramSeg(IbvSendWr w, int bb, int seg) {
        for (int i = 0; i < 3; i++) { // cleared without a view per post
            long so = segOff(bb, seg + i);
            buf.page(so).set(BE64, so & 4095, 0);
            buf.page(so).set(BE64, (so & 4095) + 8, 0);
        }
        long so = segOff(bb, seg);
        MemorySegment ap = buf.page(so);
        long ao = so & 4095; // the first 16 bytes: qkey, reserved, dqp, stat_rate_sl, fl_mlid, rlid
        ap.set(BE32, ao + Qp.AV_QKEY, w.remoteQkey);
        ap.set(BE32, ao + Qp.AV_DQP, Qp.AV_EXTENDED | w.remoteQpn & 0xff_ffff);
        ap.set(org.peerdirect.hca.cx4.ifc.CmdEntry.BE16, ao + Qp.AV_RLID, (short) w.ah.dlid());
        if (w.ah.isGlobal()) { // mlx5_wqe_av: hop limit, grh | sgid index, the remote GID (segments 2 and 3)
            long gso = segOff(bb, seg + 1);
            MemorySegment gp = buf.page(gso);
            long go = gso & 4095; // AV bytes 0x10..0x1f
            gp.set(ValueLayout.JAVA_BYTE, go + (Qp.AV_HOP_LIMIT - 0x10), (byte) w.ah.hopLimit());
            gp.set(BE32, go + (Qp.AV_GRH_GID_FL - 0x10), Qp.AV_GRH | (w.ah.sgidIndex() & 0xff) << 20);
            long rso = segOff(bb, seg + 2);
            MemorySegment rp = buf.page(rso);
            rp.set(BE64, (rso & 4095) + (Qp.AV_RGID - 0x20), w.ah.dgidHigh());
            rp.set(BE64, (rso & 4095) + (Qp.AV_RGID - 0x20) + 8, w.ah.dgidLow());
        }
    }

    /**
     * {@code set_raddr_seg}, then {@code set_atomic_seg} for an opcode with one (ATOMIC WRITE: the
     * value in the first field, as a fetch-and-add's addend). Returns the next segment.
     */
    private int setRaddrAtomicSegs(IbvSendWr w, int op, int bb, int seg) {
        long so = segOff(bb, seg);
        MemorySegment sp = buf.page(so);
        sp.set(BE64, (so & 4095) + Qp.RADDR_VA, w.remoteAddr);
        sp.set(BE32, (so & 4095) + Qp.RADDR_RKEY, w.rkey);
        sp.set(BE32, (so & 4095) + Qp.RADDR_FLUSH_LEN, op == Wqe.OP_FLUSH ? (int) w.flushLength : 0);
        seg++;
        if (Wqe.hasAtomicSegment(op)) {
            so = segOff(bb, seg);
            sp = buf.page(so);
            boolean cs = op == Wqe.OP_ATOMIC_CS;
            sp.set(BE64, (so & 4095) + Qp.ATOMIC_SWAP_ADD, cs ? w.swap : w.compareAdd);
            sp.set(BE64, (so & 4095) + Qp.ATOMIC_COMPARE, cs ? w.compareAdd : 0);
            seg++;
        }
        return seg;
    }

    /** Inline data: the 4-byte header, then the bytes, running on across basic blocks (and the ring's end). */
    private void writeInline(IbvSendWr w, int bb, int seg, int total) {
        long so = segOff(bb, seg);
        buf.page(so).set(BE32, (so & 4095), Qp.INLINE_SEG | total);
        int posInWqe = seg * Qp.DS_SIZE + 4; // byte offset from the WQE's start
        for (int i = 0; i < w.numSge; i++) {
            long va = w.sgList[i].addr;
            int left = w.sgList[i].length;
            while (left > 0) {
                int bbOff = posInWqe % Qp.SEND_WQE_BB;
                int n = Math.min(left, Qp.SEND_WQE_BB - bbOff);
                long off = sqOffset + (long) ((bb + posInWqe / Qp.SEND_WQE_BB) & sqBbs - 1) * Qp.SEND_WQE_BB + bbOff;
                try {
                    buf.process.copyOut(va, buf.page(off), off & 4095, n);
                } catch (RuntimeException e) {
                    throw new PostException(Errno.EFAULT, String.format("QP 0x%x: inline data at 0x%x: %s", qp.qpn, va, e.getMessage()), w);
                }
                va += n;
                left -= n;
                posInWqe += n;
            }
        }
    }

    /**
     * The doorbell record (release), then the BlueFlame register: the whole WQE when a single
     * request was posted and it fits the buffer ({@code mlx5_bf_copy}, one write-combined burst,
     * so the device need not read it), else the last WQE's first 8 bytes (a doorbell).
     *
     * @see "_mlx5_post_send() in providers/mlx5/qp.c (post_send_db)"
     */
    private void ringSend(int ctrlBb, int posted) {
        assert lock.isHeldByCurrentThread();
        VarHandle.releaseFence();
        buf.dbr().set(BE32, Qp.DBR_SND, head & 0xffff);
        // the record and the WQE before the doorbell (libmlx5's udma_to_device_barrier: a store
        // barrier, not a full fence; the BAR write itself is a volatile store)
        VarHandle.releaseFence();
        int bbs = head - ctrlBb & 0xffff;
        if (posted == 1 && bbs <= bfMaxBbs) {
            int len = bbs * Qp.SEND_WQE_BB;
            long so = segOff(ctrlBb, 0);
            if ((so & 4095) + len <= 4096 && (ctrlBb & sqBbs - 1) + bbs <= sqBbs) {
                uar.burst(Qp.UAR_BF_OFFSET + bfOffset, buf.page(so), so & 4095, len); // straight from the queue
            } else {
                for (int i = 0; i < bbs; i++) {
                    long bo = segOff(ctrlBb, 4 * i);
                    MemorySegment.copy(buf.page(bo), bo & 4095, bfStage, (long) i * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
                }
                uar.burst(Qp.UAR_BF_OFFSET + bfOffset, bfStage, 0, len);
            }
        } else {
            long so = segOff(ctrlBb, 0);
            long first8 = buf.page(so).get(NATIVE64, so & 4095);
            uar.write64(Qp.UAR_BF_OFFSET + bfOffset, first8);
        }
        bfOffset ^= bfSize;
    }

    /** The poller saw the CQE of the WQE at basic block {@code counter}: it and every WQE before it are done. */
    long completed(int counter) {
        int i = counter & sqBbs - 1;
        tail = next[i];
        return wrid[i];
    }

    /** {@code sw_comp} of the send queue, under the CQ's lock: WR_FLUSH_ERR for each outstanding WQE into {@code wc[k..max)}. */
    int flush(IbvWc[] wc, int k, int max) {
        lock.lock();
        try {
            while (k < max && tail != head) {
                int i = tail & sqBbs - 1;
                Mlx5Qp.flushed(wc[k++], IbvWcOpcode.SEND, wrid[i], qp.qpn);
                tail = next[i];
            }
            return k;
        } finally {
            lock.unlock();
        }
    }
}
