package org.peerdirect.mlx4.lib;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * libmlx4's QP data path ({@code struct mlx4_qp}, {@code mlx4_post_send}, {@code mlx4_post_recv}
 * of {@code providers/mlx4/qp.c}): WQEs as bytes in the process's queue buffer, each queue a ring
 * of WQEs of one power-of-two stride. A send WQE: the remote-address and atomic segments or the
 * datagram segment, data segments (or inline segments, none across a 64-byte boundary), then the
 * control segment, its first word (opcode and owner bit, the bit of the WQE's pass over the ring)
 * written last after a release barrier; the WQE {@code sq_spare_wqes} ahead is stamped
 * ({@code stamp_send_wqe}). A chain ends with the UAR's send doorbell, or, for a single inline
 * request small enough, the whole WQE copied into the BlueFlame register (alternating halves).
 * Receive WQEs are data segments closed by an {@code INVALID_LKEY} segment, announced through the
 * doorbell record alone.
 *
 * <p>Lock rules: {@link #sqLock} (libmlx4's {@code sq.lock}) guards the send ring's head, wrids,
 * stamps and the BlueFlame offset; {@link #rqLock} the receive ring's head and wrids. The tails
 * move on the poller's thread under the CQ's lock, each a volatile counter only that thread
 * writes. No lock is shared with another QP and nothing is allocated per request.
 */
public final class Mlx4Qp {

    /**
     * The buffer's layout ({@code mlx4_calc_sq_wqe_size}, {@code mlx4_alloc_qp_buf}): log2 strides
     * and WQE counts of the send and receive queues ({@code logRq} -1: none), the spare send WQEs,
     * the queues' offsets (the larger stride first) and the bytes of the whole.
     */
    public record Geometry(int sqShift, int logSq, int spare, int rqShift, int logRq, long sqOffset, long rqOffset, long bytes) {
    }

    public final int qpn;
    private final boolean ud;
    public final Mlx4Buf buf;
    private final Mlx4Uar uar;
    private final int sqWqes;
    private final int sqShift;
    private final int spare;
    private final long sqOffset;
    private final int rqWqes;
    private final int rqShift;
    private final long rqOffset;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final int maxInline;
    /** {@code sq_signal_bits}: every WQE asks for a completion ({@code sq_sig_all}), or only the signaled ones. */
    private final int signalBits;
    private final ReentrantLock sqLock = new ReentrantLock();
    private final ReentrantLock rqLock = new ReentrantLock();
    /** Guarded by sqLock: the index of the next send WQE (unbounded; its bit {@code sqWqes} is the owner bit). */
    private int sqHead;
    /** The poller's: send WQEs completed. */
    private volatile int sqTail;
    private final long[] sqWrid;
    /** Guarded by sqLock: a request's inline bytes as read from the process, before they are split into the WQE's segments. */
    private final MemorySegment inlineStage;
    /** Guarded by sqLock: the BlueFlame half the next copy goes to ({@code bf_offset}). */
    private int bfOffset;
    private int rqHead;
    private volatile int rqTail;
    private final long[] rqWrid;

    public Mlx4Qp(int qpn, IbvQpType type, Mlx4Buf buf, Mlx4Uar uar, Geometry g, int maxSendSge, int maxRecvSge, int maxInline,
            boolean sqSigAll) {
        this.qpn = qpn;
        this.signalBits = sqSigAll ? Wqe.CTRL_CQ_UPDATE : 0;
        this.ud = type == IbvQpType.UD;
        this.buf = buf;
        this.uar = uar;
        this.sqShift = g.sqShift();
        this.sqWqes = 1 << g.logSq();
        this.spare = g.spare();
        this.sqOffset = g.sqOffset();
        this.rqWqes = g.logRq() < 0 ? 0 : 1 << g.logRq();
        this.rqShift = g.rqShift();
        this.rqOffset = g.rqOffset();
        this.maxSendSge = maxSendSge;
        this.maxRecvSge = maxRecvSge;
        this.maxInline = maxInline;
        this.sqWrid = new long[sqWqes];
        this.inlineStage = MemorySegment.ofArray(new byte[Math.max(1, maxInline)]);
        this.rqWrid = new long[Math.max(1, rqWqes)];
    }

    /**
     * {@code mlx4_calc_sq_wqe_size} and {@code mlx4_alloc_qp_buf}: the send WQE big enough for the
     * largest request (control + remote address and atomic, or datagram, + the data segments or
     * the inline bytes with a header per 64-byte chunk), {@code max_send_wr} plus 2 KiB + 1 WQE of
     * headroom for the hardware's prefetch; the receive WQE for {@code max_recv_sge} data segments
     * (none with an SRQ).
     */
    public static Geometry geometry(IbvQpType type, int maxSendWr, int maxSendSge, int maxInline, int maxRecvWr, int maxRecvSge, boolean srq) {
        boolean isUd = type == IbvQpType.UD;
        int head = Wqe.CTRL_SIZE + (isUd ? Wqe.DATAGRAM_SIZE : Wqe.RADDR_SIZE);
        int inlineSegs = (maxInline + head % Wqe.INLINE_ALIGN + Wqe.INLINE_ALIGN - Wqe.INLINE_HDR - 1) / (Wqe.INLINE_ALIGN - Wqe.INLINE_HDR);
        int sges = Math.max(maxSendSge, (maxInline + inlineSegs * Wqe.INLINE_HDR + 15) / 16);
        int size = sges * Wqe.DATA_SIZE + (isUd ? Wqe.DATAGRAM_SIZE : Wqe.RADDR_SIZE);
        if (!isUd) {
            size = Math.max(size, Wqe.ATOMIC_SIZE + Wqe.RADDR_SIZE + Wqe.DATA_SIZE); // an atomic: raddr + atomic + one scatter entry
        }
        size += Wqe.CTRL_SIZE;
        int sqShift = Math.max(6, 32 - Integer.numberOfLeadingZeros(size - 1));
        int spare = (2048 >> sqShift) + 1;
        int logSq = 32 - Integer.numberOfLeadingZeros(maxSendWr + spare - 1);
        int logRq = srq ? -1 : 32 - Integer.numberOfLeadingZeros(Math.max(1, maxRecvWr) - 1);
        int rqShift = Math.max(4, 32 - Integer.numberOfLeadingZeros(Math.max(1, maxRecvSge) * Wqe.DATA_SIZE - 1));
        long sqBytes = 1L << (logSq + sqShift);
        long rqBytes = srq ? 0 : 1L << (logRq + rqShift);
        boolean rqFirst = !srq && rqShift > sqShift;
        return new Geometry(sqShift, logSq, spare, rqShift, logRq, rqFirst ? rqBytes : 0, rqFirst ? 0 : sqBytes, sqBytes + rqBytes);
    }

    // ------------------------------------------------------------------ ownership and indices

    /**
     * {@code mlx4_qp_init_sq_ownership} (before RST2INIT): every send WQE software's in the first
     * pass (owner bit set), its size the whole stride, stamped.
     */
    public void initSqOwnership() {
        sqLock.lock();
        try {
            for (int i = 0; i < sqWqes; i++) {
                long off = wqeOff(i);
                MemorySegment p = buf.page(off);
                p.set(BE32, (off & 4095) + Wqe.CTRL_OWNER_OPCODE, Wqe.OWNER_BIT);
                p.set(U8, (off & 4095) + Wqe.CTRL_FENCE_SIZE, (byte) (1 << (sqShift - 4)));
                stamp(i);
            }
        } finally {
            sqLock.unlock();
        }
    }

    /** {@code mlx4_init_qp_indices} and the cleared doorbell record (after a move to RESET). */
    public void resetIndices() {
        sqLock.lock();
        rqLock.lock();
        try {
            sqHead = 0;
            sqTail = 0;
            rqHead = 0;
            rqTail = 0;
            bfOffset = 0;
            buf.db().set(BE32, Wqe.DB_RECORD, 0);
        } finally {
            rqLock.unlock();
            sqLock.unlock();
        }
    }

    private long wqeOff(int index) {
        return sqOffset + ((long) (index & sqWqes - 1) << sqShift);
    }

    /** {@code stamp_send_wqe}: the first word of each 64-byte chunk of WQE {@code n} after the first, within its size. */
    private void stamp(int n) {
        assert sqLock.isHeldByCurrentThread();
        long off = wqeOff(n);
        MemorySegment p = buf.page(off);
        long o = off & 4095;
        int bytes = (p.get(U8, o + Wqe.CTRL_FENCE_SIZE) & Wqe.SIZE_MASK) * 16;
        for (int b = Wqe.INLINE_ALIGN; b < bytes; b += Wqe.INLINE_ALIGN) {
            p.set(BE32, o + b, Wqe.STAMP);
        }
    }

    // ------------------------------------------------------------------ post send

    private static int opcode(IbvWrOpcode op) {
        return switch (op) {
            case RDMA_WRITE -> Wqe.OP_RDMA_WRITE;
            case RDMA_WRITE_WITH_IMM -> Wqe.OP_RDMA_WRITE_IMM;
            case SEND -> Wqe.OP_SEND;
            case SEND_WITH_IMM -> Wqe.OP_SEND_IMM;
            case RDMA_READ -> Wqe.OP_RDMA_READ;
            case ATOMIC_CMP_AND_SWP -> Wqe.OP_ATOMIC_CS;
            case ATOMIC_FETCH_AND_ADD -> Wqe.OP_ATOMIC_FA;
            case ATOMIC_WRITE, FLUSH -> -1; // ConnectX-3 has no WQE for them: refused at post
        };
    }

    /** The request's checks before a WQE is built; the message is built only on refusal. */
    private void check(IbvSendWr w) {
        if (w.opcode == null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has no opcode", qpn, w.wrId), w);
        }
        if (w.numSge < 0 || w.numSge > w.sgList.length) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has num_sge %d for a list of %d", qpn, w.wrId,
                    w.numSge, w.sgList.length), w);
        }
        if (w.numSge > maxSendSge) { // mlx4_post_send: more than sq.max_gs is ENOMEM
            throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send request %d has %d SGEs, max_send_sge is %d", qpn, w.wrId,
                    w.numSge, maxSendSge), w);
        }
        if (ud && w.opcode != IbvWrOpcode.SEND && w.opcode != IbvWrOpcode.SEND_WITH_IMM) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: %s is not valid on a UD QP", qpn, w.opcode), w);
        }
        if (ud && w.ah == null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: a UD send needs an address handle", qpn), w);
        }
        if (opcode(w.opcode) < 0) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: mlx4 has no %s (the device does not report it)", qpn, w.opcode), w);
        }
        if ((w.sendFlags & IbvSendWr.SEND_INLINE) != 0 && (w.opcode == IbvWrOpcode.RDMA_READ || w.opcode.isAtomic())) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: %s cannot carry inline data", qpn, w.opcode), w);
        }
        if ((w.sendFlags & IbvSendWr.SEND_INLINE) != 0 && w.totalLength() > maxInline) { // mlx4_post_send: ENOMEM past max_inline_data
            throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: inline %s of %d bytes (max_inline_data %d)", qpn, w.opcode,
                    w.totalLength(), maxInline), w);
        }
        if (sqHead - sqTail + 1 > sqWqes - spare) {
            throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send queue full (%d requests)", qpn, sqWqes - spare), w);
        }
    }

    /**
     * {@code mlx4_post_send}: each request checked and built at the head; the doorbell (or the
     * BlueFlame copy) after the chain, also for the requests before a refused one, rung after the
     * post lock (posters of the same QP do not wait for the device's fetch).
     */
    public void postSend(IbvSendWr wr) {
        int posted = 0;
        int last = 0;
        int lastSize = 0;
        boolean lastInline = false;
        sqLock.lock();
        try {
            for (IbvSendWr w = wr; w != null; w = w.next) {
                check(w);
                int ind = sqHead;
                long off = wqeOff(ind);
                MemorySegment p = buf.page(off);
                long o = off & 4095;
                boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0 && w.numSge > 0;
                int op = opcode(w.opcode);
                int size = segments(w, op, p, o, inl) / 16;
                p.set(BE32, o + Wqe.CTRL_SRCRB_FLAGS, ((w.sendFlags & IbvSendWr.SEND_SIGNALED) != 0 ? Wqe.CTRL_CQ_UPDATE : 0)
                        | ((w.sendFlags & IbvSendWr.SEND_SOLICITED) != 0 ? Wqe.CTRL_SOLICITED : 0) | signalBits);
                p.set(BE32, o + Wqe.CTRL_IMM, w.opcode == IbvWrOpcode.SEND_WITH_IMM || w.opcode == IbvWrOpcode.RDMA_WRITE_WITH_IMM ? w.immData : 0);
                p.set(BE32, o + Wqe.CTRL_BF_QPN, ((w.sendFlags & IbvSendWr.SEND_FENCE) != 0 ? Wqe.FENCE : 0) | size);
                // the WQE before its first word: the hardware may fetch it as soon as the owner bit is right
                VarHandle.releaseFence();
                p.set(BE32, o + Wqe.CTRL_OWNER_OPCODE, op | ((ind & sqWqes) != 0 ? Wqe.OWNER_BIT : 0));
                sqWrid[ind & sqWqes - 1] = w.wrId;
                sqHead = ind + 1;
                posted++;
                last = ind;
                lastSize = size;
                lastInline = inl;
                if (w.next != null) {
                    stamp(ind + spare); // the last one's stamp waits until after the doorbell
                }
            }
        } finally {
            if (posted > 0) {
                ring(posted, last, lastSize, lastInline);
            } else {
                sqLock.unlock();
            }
        }
    }

    /**
     * Rings the device for the WQEs just built, then releases the post lock: a single inline WQE
     * of at most half a BlueFlame register goes whole by BlueFlame (its index and the QPN in its
     * control segment), anything else by the send doorbell.
     */
    private void ring(int posted, int last, int size, boolean inl) {
        assert sqLock.isHeldByCurrentThread();
        long off = wqeOff(last);
        MemorySegment p = buf.page(off);
        long o = off & 4095;
        int bfBuf = Uar.BF_REG_SIZE / 2;
        boolean bf = posted == 1 && inl && size > 1 && size <= bfBuf / 16;
        int at = bfOffset;
        if (bf) {
            p.set(BE32, o + Wqe.CTRL_OWNER_OPCODE, p.get(BE32, o + Wqe.CTRL_OWNER_OPCODE) | (last & 0xffff) << 8);
            p.set(BE32, o + Wqe.CTRL_BF_QPN, p.get(BE32, o + Wqe.CTRL_BF_QPN) | qpn << 8);
            bfOffset ^= bfBuf;
        }
        stamp(last + spare - 1);
        sqLock.unlock();
        VarHandle.releaseFence(); // udma_to_device_barrier: the WQE before the doorbell
        if (bf) {
            uar.blueFlame(at, p, o, size * 16 + 63 & ~63);
        } else {
            uar.sendDoorbell(qpn);
        }
    }

    /** Writes the segments after the control segment; returns the WQE's bytes (16-byte units times 16). */
    private int segments(IbvSendWr w, int op, MemorySegment p, long o, boolean inl) {
        long at = o + Wqe.CTRL_SIZE;
        if (ud) {
            // set_datagram_seg: the AH's address vector, the destination QP and Q_Key
            p.asSlice(at, Wqe.DATAGRAM_SIZE).fill((byte) 0);
            p.set(BE32, at + Wqe.AV_PORT_PD, w.ah.portNum() << 24);
            p.set(U8, at + Wqe.AV_G_SLID, (byte) (w.ah.isGlobal() ? Wqe.AV_G : 0));
            p.set(BE16, at + Wqe.AV_DLID, (short) w.ah.dlid());
            if (w.ah.isGlobal()) { // mlx4_av's GRH part: the source GID index, hop limit and the destination GID
                p.set(U8, at + Wqe.AV_GID_INDEX, (byte) w.ah.sgidIndex());
                p.set(U8, at + Wqe.AV_HOP_LIMIT, (byte) w.ah.hopLimit());
                p.set(BE64, at + Wqe.AV_DGID, w.ah.dgidHigh());
                p.set(BE64, at + Wqe.AV_DGID + 8, w.ah.dgidLow());
            }
            p.set(BE32, at + Wqe.DATAGRAM_DQPN, w.remoteQpn);
            p.set(BE32, at + Wqe.DATAGRAM_QKEY, w.remoteQkey);
            at += Wqe.DATAGRAM_SIZE;
        } else if (op == Wqe.OP_RDMA_WRITE || op == Wqe.OP_RDMA_WRITE_IMM || op == Wqe.OP_RDMA_READ || op == Wqe.OP_ATOMIC_CS
                || op == Wqe.OP_ATOMIC_FA) {
            p.set(BE64, at + Wqe.RADDR_VA, w.remoteAddr);
            p.set(BE32, at + Wqe.RADDR_RKEY, w.rkey);
            p.set(BE32, at + Wqe.RADDR_RKEY + 4, 0);
            at += Wqe.RADDR_SIZE;
            if (op == Wqe.OP_ATOMIC_CS || op == Wqe.OP_ATOMIC_FA) {
                boolean cs = op == Wqe.OP_ATOMIC_CS;
                p.set(BE64, at + Wqe.ATOMIC_SWAP_ADD, cs ? w.swap : w.compareAdd);
                p.set(BE64, at + Wqe.ATOMIC_COMPARE, cs ? w.compareAdd : 0);
                at += Wqe.ATOMIC_SIZE;
            }
        }
        if (inl) {
            return (int) (inline(w, p, o, at) - o);
        }
        // set_data_seg: in reverse, each byte count after its address and key (a stamp never looks like a valid count)
        for (int i = w.numSge - 1; i >= 0; i--) {
            long s = at + (long) i * Wqe.DATA_SIZE;
            p.set(BE32, s + Wqe.DATA_LKEY, w.sgList[i].lkey);
            p.set(BE64, s + Wqe.DATA_ADDR, w.sgList[i].addr);
            VarHandle.releaseFence();
            p.set(BE32, s + Wqe.DATA_BYTE_COUNT, w.sgList[i].length);
        }
        return (int) (at - o) + w.numSge * Wqe.DATA_SIZE;
    }

    /**
     * The inline data copied by the CPU from the user's buffers: a new segment header at each
     * 64-byte boundary of the WQE, each header written after its bytes. Returns the end of the
     * WQE (rounded to 16 bytes). The buffers may be reused at once.
     */
    private long inline(IbvSendWr w, MemorySegment p, long o, long seg) {
        long start = seg;
        long pos = seg + Wqe.INLINE_HDR;
        int segLen = 0;
        int segs = 0;
        long total = 0;
        for (int i = 0; i < w.numSge; i++) {
            int left = w.sgList[i].length;
            try { // one copy from the process per SGE (a page walk each), then split at the 64-byte chunks
                buf.process.copyOut(w.sgList[i].addr, inlineStage, 0, left);
            } catch (RuntimeException e) {
                throw new PostException(Errno.EFAULT, String.format("QP 0x%x: inline data at 0x%x: %s", qpn, w.sgList[i].addr, e.getMessage()), w);
            }
            total += left;
            int from = 0;
            while (left > 0) {
                int room = (int) (Wqe.INLINE_ALIGN - (pos - o & Wqe.INLINE_ALIGN - 1));
                int n = Math.min(left, room);
                MemorySegment.copy(inlineStage, from, p, pos, n);
                from += n;
                left -= n;
                pos += n;
                segLen += n;
                if (n == room) { // the chunk is full: its header, and the next segment's at the boundary
                    VarHandle.releaseFence();
                    p.set(BE32, seg, Wqe.INLINE_SEG | segLen);
                    segs++;
                    seg = pos;
                    pos += Wqe.INLINE_HDR;
                    segLen = 0;
                }
            }
        }
        if (segLen > 0) {
            VarHandle.releaseFence();
            p.set(BE32, seg, Wqe.INLINE_SEG | segLen);
            segs++;
        }
        return start + (total + (long) segs * Wqe.INLINE_HDR + 15 & ~15L);
    }

    /** The poller saw the send CQE of WQE {@code wqeIndex}: it and every WQE before it are done ({@code mlx4_poll_one}). */
    public long sendCompleted(int wqeIndex) {
        int t = sqTail;
        t += wqeIndex - t & 0xffff; // (uint16_t) (wqe_index - tail): an unsignaled WQE before it completed with it
        long id = sqWrid[t & sqWqes - 1];
        sqTail = t + 1;
        return id;
    }

    // ------------------------------------------------------------------ post receive

    /** {@code mlx4_post_recv}: each request's scatter list at the head, then the doorbell record (release). */
    public void postRecv(IbvRecvWr wr) {
        int posted = 0;
        rqLock.lock();
        try {
            for (IbvRecvWr w = wr; w != null; w = w.next) {
                if (w.numSge < 0 || w.numSge > maxRecvSge || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: receive request %d has %d SGEs, max %d", qpn, w.wrId,
                            w.numSge, maxRecvSge), w);
                }
                if (rqHead - rqTail + 1 > rqWqes) {
                    throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: receive queue full (%d requests)", qpn, rqWqes), w);
                }
                long off = rqOffset + ((long) (rqHead & rqWqes - 1) << rqShift);
                scatter(buf.page(off), off & 4095, w, maxRecvSge);
                rqWrid[rqHead & rqWqes - 1] = w.wrId;
                rqHead++;
                posted++;
            }
        } finally {
            if (posted > 0) {
                VarHandle.releaseFence();
                buf.db().set(BE32, Wqe.DB_RECORD, rqHead & 0xffff);
            }
            rqLock.unlock();
        }
    }

    /**
     * A receive WQE's data segments at byte {@code o} of page {@code p}, closed by an
     * {@code INVALID_LKEY} segment when fewer than {@code maxGs} are used (a QP's receive WQE and
     * an SRQ's after its next segment have the same shape).
     */
    static void scatter(MemorySegment p, long o, IbvRecvWr w, int maxGs) {
        int i = 0;
        for (; i < w.numSge; i++) {
            p.set(BE32, o + i * 16L + Wqe.DATA_BYTE_COUNT, w.sgList[i].length);
            p.set(BE32, o + i * 16L + Wqe.DATA_LKEY, w.sgList[i].lkey);
            p.set(BE64, o + i * 16L + Wqe.DATA_ADDR, w.sgList[i].addr);
        }
        if (i < maxGs) {
            p.set(BE32, o + i * 16L + Wqe.DATA_BYTE_COUNT, 0);
            p.set(BE32, o + i * 16L + Wqe.DATA_LKEY, Wqe.INVALID_LKEY);
            p.set(BE64, o + i * 16L + Wqe.DATA_ADDR, 0);
        }
    }

    /** The poller saw a receive CQE of this QP's own queue (receives complete in order). */
    public long recvCompleted() {
        int t = rqTail;
        rqTail = t + 1;
        return rqWrid[t & rqWqes - 1];
    }

    /** The bytes of send WQE {@code index} as they are in the process's memory (tools and tests). */
    public byte[] sendWqeBytes(int index) {
        long off = wqeOff(index);
        return buf.bytes(off, 1 << sqShift);
    }

    /** The bytes of receive WQE {@code index} as they are in the process's memory (tools and tests). */
    public byte[] recvWqeBytes(int index) {
        return buf.bytes(rqOffset + ((long) (index & rqWqes - 1) << rqShift), 1 << rqShift);
    }

    /** The receive doorbell record as the device reads it (tools and tests). */
    public int rqDoorbellRecord() {
        return buf.db().get(BE32, Wqe.DB_RECORD);
    }

    /** Send WQEs in the ring (tools and tests). */
    public int sqWqes() {
        return sqWqes;
    }

    /** The send WQE's stride in bytes (tools and tests). */
    public int sqStride() {
        return 1 << sqShift;
    }

    /** Where send WQE {@code index} lies in the process (what a program scribbling over its queue would write to). */
    public long sendWqeVa(int index) {
        return buf.va + wqeOff(index);
    }

    @Override
    public String toString() {
        return String.format("mlx4 QP 0x%x (SQ %d x %d B, RQ %d x %d B)", qpn, sqWqes, 1 << sqShift, rqWqes, rqWqes == 0 ? 0 : 1 << rqShift);
    }
}
