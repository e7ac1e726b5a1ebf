package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwQpState;
import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.hca.engine.SendWqe;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * A QP whose queues are in host memory, as {@code RST2INIT_QP}'s context described them: one
 * buffer of 4 KiB pages the MTT names (the send and the receive queue at their offsets, each a
 * ring of WQEs of one stride), the receive doorbell record, the UAR page its doorbells come
 * through. The send doorbell (or a BlueFlame write) makes the device fetch send WQEs by DMA while
 * their owner bit says they are the hardware's ({@link #fetchSend}), decoding each into the
 * engine's send slot; receive WQEs are fetched when the responder needs one ({@link #fetchRecv}).
 * A WQE the device cannot parse completes with {@code LOCAL_QP_OP_ERR} and the QP goes to ERR
 * ({@link #malformed}), as the hardware answers a bad descriptor: never a hang.
 *
 * <p>The engine's slot indices and the WQE indices run in step from 0 (one WQE, one slot), so a
 * CQE's {@code wqe_index} is the engine's slot index modulo 2^16, as libmlx4 counts.
 *
 * <p>Lock rules: {@link #sqLock} serialises the send fetch (the doorbell processing of one SQ is
 * sequential in hardware); receive fetches run under the engine queue's consumer lock.
 */
final class MemQp {

    final Qps qps;
    final HwQp hw;
    final int qpn;
    final boolean ud;
    /** The UAR page whose doorbells and BlueFlame page name this QP ({@code usr_page}). */
    final int uar;
    private final long[] pages;
    private final long dbRec;
    private final int sqWqes;
    private final int sqStride;
    private final long sqOffset;
    private final int rqWqes;
    private final int rqStride;
    private final long rqOffset;
    final ReentrantLock sqLock = new ReentrantLock();
    /** Guarded by sqLock: send WQEs fetched (the index of the next, unbounded), and the engine's producer index. */
    private int sqFetched;
    private long sqTail;
    /** Guarded by the engine receive queue's consumer lock: receive WQEs fetched. */
    private int rqFetched;
    /** Scratch, under sqLock: the WQE fetched. */
    private final MemorySegment wqe;
    /** Scratch, under the receive queue's consumer lock: a page of the ring (or the whole of a smaller one). */
    private final MemorySegment rwqe;
    private final MemorySegment word = MemorySegment.ofArray(new byte[4]);
    /** Under sqLock while a BlueFlame write is handled: the WQE it carries, for WQE index {@link #bfIndex}. */
    private MemorySegment bf;
    private long bfOffset;
    private int bfIndex;

    MemQp(Qps qps, HwQp hw, boolean ud, int uar, long[] pages, long dbRec, int logSq, int sqStride, long sqOffset, int logRq, int rqStride,
            long rqOffset) {
        this.qps = qps;
        this.hw = hw;
        this.qpn = hw.qpn;
        this.ud = ud;
        this.uar = uar;
        this.pages = pages;
        this.dbRec = dbRec;
        this.sqWqes = 1 << logSq;
        this.sqStride = sqStride;
        this.sqOffset = sqOffset;
        this.rqWqes = logRq < 0 ? 0 : 1 << logRq;
        this.rqStride = rqStride;
        this.rqOffset = rqOffset;
        this.wqe = MemorySegment.ofArray(new byte[sqStride]);
        this.rwqe = MemorySegment.ofArray(new byte[logRq < 0 ? Wqe.DATA_SIZE : (int) Math.min(4096, (long) rqStride << logRq)]);
    }

    private long addr(long bufOffset) {
        return pages[(int) (bufOffset >>> 12)] + (bufOffset & 0xfff);
    }

    /**
     * The send doorbell's work ({@code burst} null), or a BlueFlame write's ({@code burst}: the
     * WQE as the write carried it from {@code burstOffset}, {@code burstLength} bytes): every WQE
     * the hardware owns from the next one on, into the engine's slots, then the engine runs them.
     * The BlueFlame WQE is taken from the write when its index is the next one and it fits the
     * write and the stride; otherwise the write counts as a plain doorbell.
     */
    void fetchSend(MemorySegment burst, long burstOffset, int burstLength) {
        sqLock.lock();
        try {
            if (hw.state() == HwQpState.RST) {
                return;
            }
            if (burst != null) {
                int idx = burst.get(BE32, burstOffset + Wqe.CTRL_OWNER_OPCODE) >>> 8 & 0xffff;
                int bytes = (burst.get(U8, burstOffset + Wqe.CTRL_FENCE_SIZE) & Wqe.SIZE_MASK) * 16;
                if (idx == (sqFetched & 0xffff) && bytes > 0 && bytes <= burstLength && bytes <= sqStride) {
                    bf = burst;
                    bfOffset = burstOffset;
                    bfIndex = sqFetched;
                }
            }
            while (sqTail - hw.sqConsumerIndex() < hw.sqSize()) {
                MemorySegment w;
                long o;
                if (bf != null && bfIndex == sqFetched) {
                    w = bf;
                    o = bfOffset;
                } else {
                    try {
                        if (!readOwned()) {
                            break;
                        }
                    } catch (IommuFault f) {
                        qps.dmaFaults.incrementAndGet();
                        break;
                    }
                    w = wqe;
                    o = 0;
                }
                if (w == bf) {
                    qps.bfWqes.increment();
                }
                SendWqe slot = hw.sqSlot(sqTail);
                if (!decode(w, o, slot)) {
                    malformed(slot);
                }
                sqFetched++;
                sqTail++;
                qps.sendWqes.increment();
            }
            hw.sqDoorbellRecord(sqTail);
        } finally {
            bf = null; // the burst is the caller's: never kept past the write
            sqLock.unlock();
        }
        hw.ringSqDoorbell();
    }

    /**
     * Reads the WQE at {@link #sqFetched} into {@link #wqe} if the hardware owns it: the control
     * segment first, its owner bit against the pass over the ring, then (acquire) the rest of it,
     * which libmlx4 wrote before the first word.
     */
    private boolean readOwned() {
        assert sqLock.isHeldByCurrentThread();
        long at = addr(sqOffset + (long) (sqFetched & sqWqes - 1) * sqStride);
        qps.port.read(at, wqe, 0, Wqe.CTRL_SIZE);
        boolean owner = (wqe.get(BE32, Wqe.CTRL_OWNER_OPCODE) & Wqe.OWNER_BIT) != 0;
        if (owner != ((sqFetched & sqWqes) != 0)) {
            return false; // software's: not posted yet (or a stale WQE of the last pass)
        }
        VarHandle.acquireFence();
        int bytes = (wqe.get(U8, Wqe.CTRL_FENCE_SIZE) & Wqe.SIZE_MASK) * 16;
        if (bytes > Wqe.CTRL_SIZE) {
            qps.port.read(at + Wqe.CTRL_SIZE, wqe, Wqe.CTRL_SIZE, Math.min(bytes, sqStride) - Wqe.CTRL_SIZE);
        }
        return true;
    }

    /**
     * A WQE the device could not parse: the slot completes with {@code LOCAL_QP_OP_ERR} when the
     * engine reaches it (the WQEs before it run, those after it flush), as the hardware answers a
     * descriptor it cannot execute with an error CQE carrying its index.
     */
    private void malformed(SendWqe w) {
        assert sqLock.isHeldByCurrentThread();
        qps.badWqes.incrementAndGet();
        w.opcode = org.peerdirect.hca.engine.Wqe.OP_MALFORMED;
        w.ctrl = org.peerdirect.hca.engine.Wqe.CTRL_CQ_UPDATE;
        w.numSge = 0;
        w.inlineLen = 0;
        w.length = 0;
    }

    /**
     * Decodes the WQE at {@code o} of {@code s} into {@code w}: the control segment, the
     * remote-address and atomic segments or the datagram segment, then data or inline segments up
     * to its size. False when it is malformed (unknown opcode, a size of no segment or beyond the
     * stride, segments the opcode needs missing, more data segments than the QP takes, an inline
     * segment across a 64-byte boundary or longer than the QP's inline room).
     */
    private boolean decode(MemorySegment s, long o, SendWqe w) {
        int ownerOpcode = s.get(BE32, o + Wqe.CTRL_OWNER_OPCODE);
        int fenceSize = s.get(U8, o + Wqe.CTRL_FENCE_SIZE) & 0xff;
        int end = (fenceSize & Wqe.SIZE_MASK) * 16;
        int opcode = ownerOpcode & Wqe.OPCODE_MASK;
        if (!Wqe.valid(opcode) || end < Wqe.CTRL_SIZE || end > sqStride) {
            return false;
        }
        int flags = s.get(BE32, o + Wqe.CTRL_SRCRB_FLAGS);
        w.opcode = opcode; // MLX4_OPCODE_* are the engine's opcodes
        w.ctrl = ((flags & Wqe.CTRL_CQ_UPDATE) != 0 ? org.peerdirect.hca.engine.Wqe.CTRL_CQ_UPDATE : 0)
                | ((flags & Wqe.CTRL_SOLICITED) != 0 ? org.peerdirect.hca.engine.Wqe.CTRL_SOLICITED : 0)
                | ((fenceSize & Wqe.FENCE) != 0 ? org.peerdirect.hca.engine.Wqe.CTRL_FENCE : 0);
        w.imm = s.get(BE32, o + Wqe.CTRL_IMM);
        w.numSge = 0;
        w.inlineLen = 0;
        w.length = 0;
        w.remoteQkey = -1;
        w.grh = false;
        int at = Wqe.CTRL_SIZE;
        boolean atomic = opcode == Wqe.OP_ATOMIC_CS || opcode == Wqe.OP_ATOMIC_FA;
        if (ud) {
            if (opcode != Wqe.OP_SEND && opcode != Wqe.OP_SEND_IMM || at + Wqe.DATAGRAM_SIZE > end) {
                return false; // a UD QP only sends, with its address vector
            }
            long d = o + at;
            w.dlid = s.get(BE16, d + Wqe.AV_DLID) & 0xffff;
            w.grh = (s.get(U8, d + Wqe.AV_G_SLID) & Wqe.AV_G) != 0;
            if (w.grh) { // the DGID only matters to a GRH
                MemorySegment.copy(s, java.lang.foreign.ValueLayout.JAVA_BYTE, d + Wqe.AV_DGID, w.dgid, 0, 16);
            }
            w.remoteQpn = s.get(BE32, d + Wqe.DATAGRAM_DQPN) & 0xff_ffff;
            w.remoteQkey = s.get(BE32, d + Wqe.DATAGRAM_QKEY);
            at += Wqe.DATAGRAM_SIZE;
        } else if (opcode == Wqe.OP_RDMA_WRITE || opcode == Wqe.OP_RDMA_WRITE_IMM || opcode == Wqe.OP_RDMA_READ || atomic) {
            if (at + Wqe.RADDR_SIZE + (atomic ? Wqe.ATOMIC_SIZE : 0) > end) {
                return false;
            }
            w.remoteAddr = s.get(BE64, o + at + Wqe.RADDR_VA);
            w.rkey = s.get(BE32, o + at + Wqe.RADDR_RKEY);
            at += Wqe.RADDR_SIZE;
            if (atomic) {
                long swapAdd = s.get(BE64, o + at + Wqe.ATOMIC_SWAP_ADD);
                w.compareAdd = opcode == Wqe.OP_ATOMIC_CS ? s.get(BE64, o + at + Wqe.ATOMIC_COMPARE) : swapAdd;
                w.swap = swapAdd;
                at += Wqe.ATOMIC_SIZE;
            }
        }
        return dataSegments(s, o, at, end, w);
    }

    /** Data segments, or inline segments, from byte {@code at} of the WQE to {@code end}; false when malformed. */
    private boolean dataSegments(MemorySegment s, long o, int at, int end, SendWqe w) {
        if (at < end && (s.get(BE32, o + at + Wqe.DATA_BYTE_COUNT) & Wqe.INLINE_SEG) != 0) {
            return inlineSegments(s, o, at, end, w);
        }
        for (; at < end; at += Wqe.DATA_SIZE) {
            int bc = s.get(BE32, o + at + Wqe.DATA_BYTE_COUNT);
            if (w.numSge == w.maxSge() || (bc & Wqe.INLINE_SEG) != 0) {
                return false;
            }
            w.byteCount[w.numSge] = bc;
            w.lkey[w.numSge] = s.get(BE32, o + at + Wqe.DATA_LKEY);
            w.addr[w.numSge] = s.get(BE64, o + at + Wqe.DATA_ADDR);
            w.length += bc & 0xffff_ffffL;
            w.numSge++;
        }
        return true;
    }

    /**
     * Inline data: segments of a 4-byte header and the bytes, none across a 64-byte boundary of
     * the WQE (libmlx4 starts a new segment at each), up to the WQE's size rounded to 16 bytes.
     */
    private boolean inlineSegments(MemorySegment s, long o, int at, int end, SendWqe w) {
        int len = 0;
        int pos = at;
        while ((pos + 15 & ~15) < end) {
            int hdr = s.get(BE32, o + pos);
            int n = hdr & Wqe.INLINE_LEN_MASK;
            int room = Wqe.INLINE_ALIGN - (pos & Wqe.INLINE_ALIGN - 1) - Wqe.INLINE_HDR;
            if ((hdr & Wqe.INLINE_SEG) == 0 || (hdr & ~(Wqe.INLINE_SEG | Wqe.INLINE_LEN_MASK)) != 0 || n > room || pos + Wqe.INLINE_HDR + n > end
                    || len + n > w.inline.byteSize()) {
                return false;
            }
            MemorySegment.copy(s, o + pos + Wqe.INLINE_HDR, w.inline, len, n);
            len += n;
            pos += Wqe.INLINE_HDR + n;
            if (n == 0) {
                break; // an empty segment ends the data (a header at a chunk's end with nothing after it)
            }
        }
        w.inlineLen = len;
        w.length = len;
        w.ctrl |= org.peerdirect.hca.engine.Wqe.CTRL_INLINE;
        return true;
    }

    /**
     * The receive fetch ({@link org.peerdirect.hca.engine.RecvFetcher}): the doorbell record's
     * 16-bit producer count, then the new WQEs' data segments (each up to an {@code INVALID_LKEY}
     * segment, the stride's end or the slot's room) into the engine's slots from {@code tail}; the
     * WQEs that lie together in one page of the ring are read in one DMA, as the hardware's
     * prefetcher takes them.
     */
    long fetchRecv(RecvQueue q, long head, long tail) {
        int target;
        try {
            qps.port.read(dbRec + Wqe.DB_RECORD, word, 0, 4);
            target = word.get(BE32, 0) & 0xffff;
        } catch (IommuFault f) {
            qps.dmaFaults.incrementAndGet();
            return tail;
        }
        long t = tail;
        int want = (int) Math.min(target - rqFetched & 0xffff, q.size() - (tail - head));
        while (want > 0) {
            int idx = rqFetched & rqWqes - 1;
            long off = rqOffset + (long) idx * rqStride;
            // the ring's WQEs are stride-aligned and a stride divides the page: a run ends at the page's or the ring's end
            int run = Math.min(want, Math.min(rqWqes - idx, (int) ((4096 - (off & 4095)) / rqStride)));
            try {
                qps.port.read(addr(off), rwqe, 0, (long) run * rqStride);
            } catch (IommuFault f) {
                qps.dmaFaults.incrementAndGet();
                break;
            }
            for (int k = 0; k < run; k++) {
                Qps.scatter(rwqe, k * rqStride, (k + 1) * rqStride, q.slot(t));
                rqFetched++;
                t++;
            }
            qps.recvWqes.add(run);
            want -= run;
        }
        return t;
    }
}
