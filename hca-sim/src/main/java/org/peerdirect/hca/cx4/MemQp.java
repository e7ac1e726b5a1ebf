package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Umr;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwQpState;
import org.peerdirect.hca.engine.QpContext;
import org.peerdirect.hca.engine.RecvFetcher;
import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.hca.engine.SendWqe;
import org.peerdirect.hca.engine.UmrWqe;
import org.peerdirect.hca.engine.Wqe;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * A QP in host memory: one buffer (RQ first, SQ after it, as {@code mlx5_ib} lays it out), its
 * doorbell record and the device's fetch state. A write to a BlueFlame register of the QP's UAR
 * makes the device read the send doorbell record and fetch every new WQE by DMA, basic block by
 * basic block, decoding it into the engine's send slots ({@link #fetchSend}); receive WQEs are
 * fetched when the responder needs one ({@link #fetchRecv}).
 *
 * <p>Lock rules: the send fetch is serialised by {@link #sqLock} (the doorbell processing of one
 * SQ is sequential in hardware); receive fetches run under the engine queue's consumer lock.
 */
final class MemQp {

    /** Inline bytes one send WQE can carry in this model (the engine's slot capacity). */
    static final int MAX_INLINE = 512;
    /** Data segments one send WQE can carry (1 KiB WQEs: {@code max_wqe_sz_sq}). */
    static final int MAX_SEND_DS = 1024 / Qp.DS_SIZE;

    private final DataPath dp;
    /** The SRQ its receives come from, or null. */
    final Srqs.MemSrq srq;
    final HwQp hw;
    final int st;
    /** The work queue's buffer (RQ then SQ): a {@code pas} list or a umem range. */
    final QueueMemory wq;
    /** The doorbell record (receive counter, then send counter). */
    final QueueMemory dbr;
    final int uar;
    final int sqBbs;
    final int rqWqes;
    final int rqStride;
    final long sqOffset;
    final FirmwarePages.Slot context;
    /** The context the transition commands built (firmware thread). */
    QpContext ctx = new QpContext();
    final ReentrantLock sqLock = new ReentrantLock();
    /** Guarded by sqLock: send WQE basic blocks fetched (16-bit counter as the doorbell record's). */
    int sqFetched;
    /** Guarded by sqLock: the engine's send producer index. */
    long sqTail;
    /** Send WQEs fetched, and of those the ones a BlueFlame write carried (written under sqLock). */
    final Tally sqWqes = new Tally();
    final Tally sqWqesBlueFlame = new Tally();
    /** Receive WQEs fetched (written under the engine receive queue's consumer lock). */
    final Tally rqWqesFetched = new Tally();
    /** Engine send slot → the WQE's wqe_index (its first basic block), for the CQE. */
    final int[] sqCounterOfSlot;
    /** Guarded by the engine receive queue's consumer lock: receive WQEs fetched. */
    int rqFetched;
    final int[] rqCounterOfSlot;
    private final MemorySegment bb = MemorySegment.ofArray(new byte[Qp.SEND_WQE_BB]);
    /** Guarded by sqLock: the basic block {@link #readBb} made current, {@code cur} from {@code curOff} (a BlueFlame burst, or {@link #bb}). */
    private MemorySegment cur = bb;
    private long curOff;
    /** Guarded by sqLock, while a WQE is decoded: the basic block its segments reached ({@link #segAt}). */
    private int bbIndex;
    /** A UMR WQE's basic blocks, copied together (under sqLock). */
    private final MemorySegment umrWqe = MemorySegment.ofArray(new byte[3 * Qp.SEND_WQE_BB]);
    private final MemorySegment word = MemorySegment.ofArray(new byte[4]);
    /**
     * Guarded by sqLock, set only while {@link #fetchSend} runs for a BlueFlame write: the
     * burst (from {@code bfOffset}), and the basic blocks {@code [bfFirst, bfFirst + bfBbs)} it carries.
     */
    private MemorySegment bf;
    private long bfOffset;
    private int bfFirst;
    private int bfBbs;
    /** A UD WQE's address vector as fetched (under sqLock). */
    private final MemorySegment av = MemorySegment.ofArray(new byte[Qp.AV_SIZE]);
    private final MemorySegment rwqe;

    MemQp(DataPath dp, HwQp hw, int st, QueueMemory wq, QueueMemory dbr, int uar, int logSq, int rqWqes, int rqStride, FirmwarePages.Slot context,
            Srqs.MemSrq srq) {
        this.dp = dp;
        this.srq = srq;
        this.hw = hw;
        this.st = st;
        this.wq = wq;
        this.dbr = dbr;
        this.uar = uar;
        this.sqBbs = 1 << logSq;
        // the buffer's RQ part: none for a zero-length or SRQ receive side, whatever the engine keeps for it
        this.rqWqes = rqWqes;
        this.rqStride = rqStride;
        this.sqOffset = (long) rqWqes * rqStride;
        this.context = context;
        this.sqCounterOfSlot = new int[hw.sqSize()];
        this.rqCounterOfSlot = new int[hw.recvQueue() == null ? 1 : hw.recvQueue().size()];
        this.rwqe = MemorySegment.ofArray(new byte[Math.max(16, rqStride)]);
    }

    int sqWqeCounter(long slot) {
        return sqCounterOfSlot[(int) slot & sqCounterOfSlot.length - 1];
    }

    int rqWqeCounter(long slot) {
        return srq != null ? srq.wqeIndex(slot) : rqCounterOfSlot[(int) slot & rqCounterOfSlot.length - 1];
    }

    /** 2RST: the hardware's counters start again from zero, as the driver's do. */
    void reset() {
        sqLock.lock();
        try {
            sqFetched = 0;
            sqTail = hw.sqConsumerIndex();
        } finally {
            sqLock.unlock();
        }
        rqFetched = 0; // the engine queue was discarded under its lock; no fetch runs in RST
    }

    private long addr(long bufOffset) {
        return wq.address(bufOffset);
    }

    private int readDbr(long off) {
        dbr.port().read(dbr.address(off), word, 0, 4);
        return word.get(BE32, 0);
    }

    /** Makes send basic block {@code n} (modulo the SQ) current ({@link #cur}): in the BlueFlame write that carried it, else read by DMA into {@link #bb}. */
    private void readBb(int n) {
        if (bf != null && (n - bfFirst & 0xffff) < bfBbs) {
            cur = bf; // read in place: the burst is stable while the write is being handled
            curOff = bfOffset + (long) (n - bfFirst & 0xffff) * Qp.SEND_WQE_BB;
            return;
        }
        wq.port().read(addr(sqOffset + (long) (n & sqBbs - 1) * Qp.SEND_WQE_BB), bb, 0, Qp.SEND_WQE_BB);
        cur = bb;
        curOff = 0;
    }

    /**
     * The doorbell's work: every WQE up to the target, into the engine's slots; then the engine
     * runs them. The target is what the send doorbell record shows, or, for a BlueFlame write
     * ({@code burst} not null: {@code burstLength} bytes from {@code burstOffset}), the end of
     * the WQE it carries, when that WQE lies ahead within the ring and the burst holds all of
     * it; a burst that does not (stale, torn or short) is taken as a plain doorbell.
     */
    void fetchSend(MemorySegment burst, long burstOffset, int burstLength) {
        fetchSend(burst, burstOffset, burstLength, -1);
    }

    /**
     * {@link #fetchSend} up to producer index {@code pi} (16 bits) when not negative: a DPA
     * outbox's {@code SXD_DB} carries the index itself, so the device does not read the doorbell
     * record.
     */
    void fetchSend(MemorySegment burst, long burstOffset, int burstLength, int pi) {
        sqLock.lock();
        try {
            if (hw.state() == HwQpState.RST || hw.xrcTarget()) { // an XRC target has no send queue to fetch
                return;
            }
            int target = pi < 0 ? -1 : pi & 0xffff;
            if (burst != null) {
                int idx = burst.get(BE32, burstOffset + Qp.CTRL_OPMOD_IDX_OPCODE) >>> 8 & 0xffff;
                int bbs = ((burst.get(BE32, burstOffset + Qp.CTRL_QPN_DS) & 0x3f) * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
                if (bbs > 0 && bbs * Qp.SEND_WQE_BB <= burstLength && (idx - sqFetched & 0xffff) + bbs <= sqBbs) {
                    bf = burst;
                    bfOffset = burstOffset;
                    bfFirst = idx;
                    bfBbs = bbs;
                    target = idx + bbs & 0xffff;
                }
            }
            if (target < 0) {
                try {
                    target = readDbr(Qp.DBR_SND) & 0xffff;
                } catch (IommuFault f) {
                    dp.dmaFaults.incrementAndGet();
                    return;
                }
            }
            if ((target - sqFetched & 0xffff) > sqBbs) {
                // more WQEs than the ring holds: an index behind the one fetched (posters racing on
                // one queue rang out of order) or garbage. [model] Ignored, counted: fetching would
                // run the ring's stale slots again, a silent wrong answer.
                dp.badDoorbells.incrementAndGet();
                return;
            }
            while ((target - sqFetched & 0xffff) != 0) {
                if (sqTail - hw.sqConsumerIndex() >= hw.sqSize()) {
                    break; // the driver rang past what its ring can hold: the rest waits for the next doorbell
                }
                SendWqe w = hw.sqSlot(sqTail);
                int used;
                try {
                    used = decode(w);
                    if (used <= 0) {
                        used = malformed(w);
                    }
                } catch (IommuFault f) {
                    dp.dmaFaults.incrementAndGet();
                    return;
                }
                if (bf != null && (sqFetched - bfFirst & 0xffff) < bfBbs) {
                    sqWqesBlueFlame.increment();
                }
                sqCounterOfSlot[(int) sqTail & sqCounterOfSlot.length - 1] = sqFetched & 0xffff;
                sqFetched = sqFetched + used & 0xffff;
                sqTail++;
                sqWqes.increment();
            }
            hw.sqDoorbellRecord(sqTail);
        } finally {
            bf = null; // the burst is the caller's: never kept past the write
            cur = bb;
            sqLock.unlock();
        }
        hw.ringSqDoorbell();
    }

    /**
     * A WQE {@link #decode} refused: the slot completes with {@code LOCAL_QP_OP_ERR} when the
     * engine reaches it (the WQEs before it run, those after it flush), as the hardware answers
     * a WQE it cannot parse with an error CQE carrying its {@code wqe_counter} rather than
     * dropping it: a user waiting for that completion gets one. The device steps over it by its
     * DS count (one basic block when that is 0), as it steps over any WQE. Returns the blocks.
     */
    private int malformed(SendWqe w) {
        dp.badWqes.incrementAndGet();
        readBb(sqFetched);
        int ds = cur.get(BE32, curOff + Qp.CTRL_QPN_DS) & 0x3f;
        w.opcode = Wqe.OP_MALFORMED;
        w.ctrl = Wqe.CTRL_CQ_UPDATE;
        w.numSge = 0;
        w.inlineLen = 0;
        w.length = 0;
        return Math.max(1, (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB);
    }

    /**
     * Decodes the WQE at {@link #sqFetched} into {@code w}: the control segment, the remote
     * address, atomic and datagram segments the opcode and service type call for, then data
     * or inline segments. Returns the basic blocks it spans, or 0 when it is malformed
     * (unknown opcode, QPN of another QP, DS count too small or too large).
     */
    private int decode(SendWqe w) {
        if (st == Qp.ST_REG_UMR) {
            return decodeUmr(w);
        }
        readBb(sqFetched);
        int opIdx = cur.get(BE32, curOff + Qp.CTRL_OPMOD_IDX_OPCODE);
        int qpnDs = cur.get(BE32, curOff + Qp.CTRL_QPN_DS);
        int ds = qpnDs & 0x3f;
        int opcode = opIdx & 0xff;
        if (qpnDs >>> 8 != hw.qpn || ds < 1 || ds > MAX_SEND_DS || !Wqe.valid(opcode)) {
            return 0;
        }
        int flags = cur.get(ValueLayout.JAVA_BYTE, curOff + Qp.CTRL_FM_CE_SE) & 0xff;
        w.opcode = opcode;
        w.ctrl = ((flags & Qp.CTRL_CQ_UPDATE) != 0 ? Wqe.CTRL_CQ_UPDATE : 0) | ((flags & Qp.CTRL_SOLICITED) != 0 ? Wqe.CTRL_SOLICITED : 0)
                | ((flags & Qp.CTRL_FENCE) != 0 ? Wqe.CTRL_FENCE : 0);
        w.imm = cur.get(BE32, curOff + Qp.CTRL_IMM);
        w.numSge = 0;
        w.inlineLen = 0;
        w.length = 0;
        w.remoteQkey = -1;
        w.grh = false;
        int seg = 1; // in 16-byte units from the WQE's start
        bbIndex = sqFetched;
        if (st == Qp.ST_XRC) {
            // the XRC segment: the SRQ at the target that receives the message (the XRCETH)
            if (ds < seg + 1) {
                return 0;
            }
            w.xrcSrqn = cur.get(BE32, curOff + (long) seg * Qp.DS_SIZE + Qp.XRC_SRQN) & 0xff_ffff;
            seg++;
        }
        if (st == Qp.ST_UD) {
            seg = udSegment(w, ds, seg, opcode);
        } else if (opcode == Wqe.OP_FLUSH) {
            seg = flushSegment(w, ds, seg);
        } else if (opcode == Wqe.OP_RDMA_WRITE || opcode == Wqe.OP_RDMA_WRITE_IMM || opcode == Wqe.OP_RDMA_READ || Wqe.hasAtomicSegment(opcode)) {
            seg = remoteSegments(w, ds, seg, opcode);
        }
        if (seg < 0 || !dataSegments(w, ds, seg)) {
            return 0;
        }
        return (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
    }

    /** A UD send's 48-byte address vector from segment {@code seg}: the segment after it, or -1 when malformed. */
    private int udSegment(SendWqe w, int ds, int seg, int opcode) {
        if (ds < seg + Qp.AV_SIZE / Qp.DS_SIZE || opcode != Wqe.OP_SEND && opcode != Wqe.OP_SEND_IMM) {
            return -1; // a UD QP only sends: RDMA, atomics and FLUSH there are malformed
        }
        // the 48-byte address vector: segments 1..3 of the WQE (may cross into the next BB)
        for (int i = 0; i < 3; i++) {
            segAt(seg + i);
            MemorySegment.copy(cur, curOff + (long) ((seg + i) & 3) * Qp.DS_SIZE, av, (long) i * Qp.DS_SIZE, Qp.DS_SIZE);
        }
        w.remoteQkey = av.get(BE32, Qp.AV_QKEY);
        w.remoteQpn = av.get(BE32, Qp.AV_DQP) & 0xff_ffff;
        // as for the QP's path: LID routing on InfiniBand, the GID on RoCE (a RoCE AV without GRH goes nowhere)
        boolean avGrh = (av.get(BE32, Qp.AV_GRH_GID_FL) & Qp.AV_GRH) != 0;
        w.dlid = !dp.engine.ethernet() ? av.get(BE16, Qp.AV_RLID) & 0xffff : avGrh ? Roce.lidOfGid(av, Qp.AV_RGID) : 0;
        w.grh = avGrh || dp.engine.ethernet();
        if (w.grh) { // the DGID only matters to a GRH
            MemorySegment.copy(av, ValueLayout.JAVA_BYTE, Qp.AV_RGID, w.dgid, 0, 16);
        }
        return seg + 3;
    }

    /**
     * A FLUSH: ctrl (FETH word in the immediate) + remote address (length in its last word),
     * nothing after. The segment after it, or -1 when malformed.
     */
    private int flushSegment(SendWqe w, int ds, int seg) {
        if (ds != seg + 1) {
            return -1;
        }
        segAt(seg);
        long o = (long) (seg & 3) * Qp.DS_SIZE;
        w.remoteAddr = cur.get(BE64, curOff + o + Qp.RADDR_VA);
        w.rkey = cur.get(BE32, curOff + o + Qp.RADDR_RKEY);
        w.length = cur.get(BE32, curOff + o + Qp.RADDR_FLUSH_LEN) & 0xffff_ffffL;
        w.flushType = w.imm & Wqe.FLUSH_TYPE_MASK;
        w.flushLevel = (w.imm & Wqe.FLUSH_LEVEL_MASK) >>> Wqe.FLUSH_LEVEL_SHIFT;
        return seg + 1;
    }

    /** RDMA and atomic operations: the remote-address segment, then the atomic one if the opcode has it. The segment after them, or -1. */
    private int remoteSegments(SendWqe w, int ds, int seg, int opcode) {
        if (ds < seg + 1) {
            return -1;
        }
        segAt(seg);
        long o = (long) (seg & 3) * Qp.DS_SIZE;
        w.remoteAddr = cur.get(BE64, curOff + o + Qp.RADDR_VA);
        w.rkey = cur.get(BE32, curOff + o + Qp.RADDR_RKEY);
        seg++;
        if (Wqe.hasAtomicSegment(opcode)) {
            if (ds < seg + 1) {
                return -1;
            }
            segAt(seg);
            o = (long) (seg & 3) * Qp.DS_SIZE;
            long swapAdd = cur.get(BE64, curOff + o + Qp.ATOMIC_SWAP_ADD);
            long compare = cur.get(BE64, curOff + o + Qp.ATOMIC_COMPARE);
            w.compareAdd = opcode == Wqe.OP_ATOMIC_CS ? compare : swapAdd;
            w.swap = swapAdd;
            seg++;
            if (opcode == Wqe.OP_ATOMIC_WRITE) {
                w.length = 8; // the value travels in the atomic segment; data segments after it are malformed (the requester refuses them)
            }
        }
        return seg;
    }

    /** Data or inline segments from {@code seg} up to {@code ds}; false when malformed. */
    private boolean dataSegments(SendWqe w, int ds, int seg) {
        while (seg < ds) {
            segAt(seg);
            long o = (long) (seg & 3) * Qp.DS_SIZE;
            int bc = cur.get(BE32, curOff + o + Qp.DATA_BYTE_COUNT);
            if ((bc & Qp.INLINE_SEG) != 0) {
                return inlineSegment(w, ds, seg, o, bc & 0x3ff);
            }
            if (w.numSge == w.maxSge()) {
                return false;
            }
            w.byteCount[w.numSge] = bc;
            w.lkey[w.numSge] = cur.get(BE32, curOff + o + Qp.DATA_LKEY);
            w.addr[w.numSge] = cur.get(BE64, curOff + o + Qp.DATA_ADDR);
            w.length += bc & 0xffff_ffffL;
            w.numSge++;
            seg++;
        }
        return true;
    }

    /** Inline data of {@code len} bytes in segment {@code seg} (at {@code o} in its basic block), the WQE's last; false when malformed. */
    private boolean inlineSegment(SendWqe w, int ds, int seg, long o, int len) {
        if (w.numSge != 0 || len > MAX_INLINE || (4 + len + 15) / 16 > ds - seg) {
            return false;
        }
        // the bytes follow the 4-byte header, possibly across basic blocks
        long from = o + 4;
        int copied = 0;
        while (copied < len) {
            long room = Qp.SEND_WQE_BB - from;
            int n = (int) Math.min(room, len - copied);
            MemorySegment.copy(cur, curOff + from, w.inline, copied, n);
            copied += n;
            if (copied < len) {
                bbIndex++;
                readBb(bbIndex);
                from = 0;
            }
        }
        w.inlineLen = len;
        w.length = len;
        w.ctrl |= Wqe.CTRL_INLINE;
        return true;
    }

    /**
     * A REG_UMR QP's WQE: the UMR control segment, the mkey segment and the data segment of the
     * translation list, into the slot's {@link UmrWqe} (the engine fetches the list when it
     * executes the request). Anything but a UMR, or a UMR of the wrong size or with its list
     * inline (not built), is malformed.
     */
    private int decodeUmr(SendWqe w) {
        readBb(sqFetched);
        int ds = cur.get(BE32, curOff + Qp.CTRL_QPN_DS) & 0x3f;
        // only the basic blocks the WQE spans (at most those of a UMR with its data segment)
        int bbs = (Math.min(ds, Umr.DS_WITH_DATA) * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
        for (int b = 0; b < bbs; b++) {
            if (b > 0) {
                readBb(sqFetched + b);
            }
            MemorySegment.copy(cur, curOff, umrWqe, (long) b * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
        }
        int opIdx = umrWqe.get(BE32, Qp.CTRL_OPMOD_IDX_OPCODE);
        int qpnDs = umrWqe.get(BE32, Qp.CTRL_QPN_DS);
        int flags = umrWqe.get(ValueLayout.JAVA_BYTE, Umr.CTRL_SEG + Umr.FLAGS) & 0xff;
        int octowords = umrWqe.get(BE16, Umr.CTRL_SEG + Umr.XLT_OCTOWORDS) & 0xffff;
        boolean sized = ds == Umr.DS_WITH_DATA || ds == Umr.DS_NO_DATA && octowords == 0; // a list needs its data segment
        if ((opIdx & 0xff) != Wqe.OP_UMR || qpnDs >>> 8 != hw.qpn || !sized || (flags & UmrWqe.FLAG_INLINE) != 0) {
            return 0;
        }
        UmrWqe u = w.umr == null ? w.umr = new UmrWqe() : w.umr;
        int ctl = umrWqe.get(ValueLayout.JAVA_BYTE, Qp.CTRL_FM_CE_SE) & 0xff;
        w.opcode = Wqe.OP_UMR;
        w.ctrl = (ctl & Qp.CTRL_CQ_UPDATE) != 0 ? Wqe.CTRL_CQ_UPDATE : 0;
        w.numSge = 0;
        w.inlineLen = 0;
        w.length = 0;
        u.mkey = umrWqe.get(BE32, Qp.CTRL_IMM);
        u.flags = flags;
        u.mask = umrWqe.get(BE64, Umr.CTRL_SEG + Umr.MKEY_MASK);
        long m = Umr.MKEY_SEG;
        u.free = Mkey.MKC_FREE.get(umrWqe, m) != 0;
        u.perm = Mkeys.perm(umrWqe, m);
        u.keyByte = Mkey.MKC_MKEY_7_0.get(umrWqe, m);
        u.pdn = Mkey.MKC_PD.get(umrWqe, m);
        u.start = umrWqe.get(BE64, m + Mkey.MKC_START_ADDR);
        u.length = umrWqe.get(BE64, m + Mkey.MKC_LEN);
        u.length64 = Mkey.MKC_LENGTH64.get(umrWqe, m) != 0;
        u.logPageSize = Mkey.MKC_LOG_PAGE_SIZE.get(umrWqe, m);
        u.xltEntries = octowords * Umr.MTT_PER_OCTOWORD;
        long offset = (umrWqe.get(BE16, Umr.CTRL_SEG + Umr.XLT_OFFSET) & 0xffffL)
                | (umrWqe.get(BE32, Umr.CTRL_SEG + Umr.XLT_OFFSET_47_16) & 0xffff_ffffL) << 16;
        u.xltOffset = (flags & UmrWqe.FLAG_TRANSLATION_OFFSET_EN) != 0 ? offset * Umr.MTT_PER_OCTOWORD : 0;
        if (ds == Umr.DS_WITH_DATA) {
            u.xltByteCount = umrWqe.get(BE32, Umr.DATA_SEG + Qp.DATA_BYTE_COUNT) & 0xffff_ffffL;
            u.xltLkey = umrWqe.get(BE32, Umr.DATA_SEG + Qp.DATA_LKEY);
            u.xltIova = umrWqe.get(BE64, Umr.DATA_SEG + Qp.DATA_ADDR);
        } else {
            u.xltByteCount = 0;
        }
        return (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
    }

    /** Makes the basic block of segment {@code seg} current (a WQE's segments run on across basic blocks). */
    private void segAt(int seg) {
        int want = sqFetched + seg / 4 & 0xffff;
        if (want != bbIndex) {
            readBb(want);
        }
        bbIndex = want;
    }

    /**
     * The receive fetch ({@link org.peerdirect.hca.engine.RecvFetcher}): reads the receive
     * doorbell record, then each new WQE's data segments (until the stride ends or an
     * {@code INVALID_LKEY} segment) into the engine's slots from {@code tail}.
     */
    long fetchRecv(RecvQueue q, long head, long tail) {
        int target;
        try {
            target = readDbr(Qp.DBR_RCV) & 0xffff;
        } catch (IommuFault f) {
            dp.dmaFaults.incrementAndGet();
            return tail;
        }
        long t = tail;
        while ((target - rqFetched & 0xffff) != 0 && t - head < q.size()) {
            try {
                wq.fetchReceive((long) (rqFetched & rqWqes - 1) * rqStride, dbr.address(Qp.DBR_RCV), rwqe, rqStride);
            } catch (IommuFault f) {
                dp.dmaFaults.incrementAndGet();
                break;
            }
            DataPath.dataSegments(rwqe, 0, rqStride, q.slot(t));
            rqCounterOfSlot[(int) t & rqCounterOfSlot.length - 1] = rqFetched & 0xffff;
            rqFetched = rqFetched + 1 & 0xffff;
            t++;
            rqWqesFetched.increment();
        }
        return t;
    }
}
