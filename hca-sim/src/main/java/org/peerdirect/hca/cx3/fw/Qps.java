package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.BitSet;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.QpContext;
import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.QpCaps;
import org.peerdirect.hca.engine.QpCommand;
import org.peerdirect.hca.engine.RecvWqe;
import org.peerdirect.kernel.dma.DmaPort;

/**
 * The QP commands ({@code qp.c} from the device's side). A QP number names a QP context in ICM
 * the driver owns ({@code mlx4_qp_alloc} issues no command); the device's QP comes to life at
 * {@code RST2INIT_QP} from the context in the mailbox (service type, PD, CQs, SRQ, the queues'
 * sizes and strides, their MTT, the doorbell record, the UAR page) as a {@link MemQp} over an
 * engine QP, and goes at {@code 2RST_QP} (the driver's destroy, {@code mlx4_qp_free}, is
 * {@code 2RST_QP} then no command). The other transitions ({@code INIT2INIT_QP} ...
 * {@code 2ERR_QP}) and {@code QUERY_QP} act on it. A command in the wrong state is
 * {@code BAD_QP_STATE}, an unknown CQ or SRQ {@code BAD_RESOURCE}, a size beyond QUERY_DEV_CAP
 * {@code BAD_SIZE}, another bad field {@code BAD_PARAM}.
 *
 * <p>Lock rules: commands on the firmware thread alone; {@link #qps} is read by the data path
 * (doorbells, CQE writers).
 */
final class Qps {

    private final Firmware fw;
    final DmaPort port;
    /** qpn → the QP in host memory, from RST2INIT to 2RST. */
    private final AtomicReferenceArray<MemQp> qps = new AtomicReferenceArray<>(HcaDevice.MAX_QP);
    /** Firmware thread: QPs moved to ERR from RST (no context given: nothing to fetch). */
    private final BitSet errWithoutContext = new BitSet();
    /** Send WQEs fetched, of them the ones a BlueFlame write carried, receive WQEs fetched (QPs' and SRQs'). */
    final LongAdder sendWqes = new LongAdder();
    final LongAdder bfWqes = new LongAdder();
    final LongAdder recvWqes = new LongAdder();
    /** Send WQEs the device could not parse (completed in error), and WQE or record reads the IOMMU refused. */
    final AtomicLong badWqes = new AtomicLong();
    final AtomicLong dmaFaults = new AtomicLong();

    Qps(Firmware fw) {
        this.fw = fw;
        this.port = fw.port;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        for (QpCommand q : QpCommand.values()) {
            table.put(q.opcode, c -> modify(q, c));
        }
        table.put(Mlx4Cmd.QUERY_QP, this::query);
    }

    /** The QP numbered {@code qpn} in hardware ownership, or null (any thread). */
    MemQp qp(int qpn) {
        return qpn >= 0 && qpn < qps.length() ? qps.get(qpn) : null;
    }

    /** QPs with a context in hardware ownership. */
    int count() {
        int n = 0;
        for (int i = 0; i < qps.length(); i++) {
            n += qps.get(i) == null ? 0 : 1;
        }
        return n;
    }

    /** CLOSE_HCA, reset: forgotten (the engine's QPs went with the engine). */
    void dropAll() {
        for (int i = 0; i < qps.length(); i++) {
            qps.set(i, null);
        }
        errWithoutContext.clear();
    }

    /**
     * A CQE's {@code wqe_index}: a receive from an SRQ reports the SRQ WQE's buffer index; a QP's
     * send or receive its index in its queue, which is the engine's slot index.
     */
    int cqeWqeIndex(Cqe c) {
        if (!c.isSend && c.srqn != 0) {
            Srqs.MemSrq s = fw.srqs.srq(c.srqn);
            return s == null ? (int) c.wqeIndex : s.wqeIndex(c.wqeIndex);
        }
        return (int) c.wqeIndex;
    }

    private int qpn(Firmware.Cmd c) throws Refused {
        int qpn = c.inMod() & 0xff_ffff;
        // below 1 << LOG_RSVD_QP: the reserved QPs QUERY_DEV_CAP reports (special QPs, firmware's)
        if ((c.inMod() & 0xff00_0000) != 0 || qpn < 1 << Firmware.LOG_RSVD_QP || qpn >= HcaDevice.MAX_QP) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RESOURCE, String.format("QP 0x%x is not a QP number of the device (0x%x..0x%x)", c.inMod(),
                    1 << Firmware.LOG_RSVD_QP, HcaDevice.MAX_QP - 1));
        }
        return qpn;
    }

    private long modify(QpCommand cmd, Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int qpn = qpn(c);
        MemQp q = qps.get(qpn);
        if (q == null) {
            return withoutContext(cmd, c, qpn);
        }
        if (cmd == QpCommand.RST2INIT) {
            throw new Refused(Mlx4Cmd.STAT_BAD_QP_STATE, String.format("QP 0x%x: RST2INIT_QP in state %s", qpn, q.hw.state()));
        }
        org.peerdirect.hca.engine.QpContext ctx = q.hw.context();
        if (cmd != QpCommand.TO_ERR && cmd != QpCommand.TO_RST) {
            read(fw.inbox(c, QpContext.MAILBOX_SIZE).asSlice(QpContext.CONTEXT), ctx);
        }
        try {
            q.hw.modify(cmd, ctx);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        if (cmd == QpCommand.TO_RST) {
            give(q);
        }
        return 0;
    }

    /** 2RST: the QP is the driver's again; the engine's QP goes (it waits until no WQE of it executes). */
    private void give(MemQp q) {
        qps.set(q.qpn, null);
        q.hw.destroy();
    }

    /**
     * A transition of a QP in RST (no context yet): RST2INIT creates it from the context, and so
     * does 2ERR with a mailbox ({@code mlx4_qp_modify} sends the context with every command but
     * 2RST): a QP on an SRQ reaches ERR known as one. 2RST, and 2ERR without a mailbox, only
     * change its state.
     */
    private long withoutContext(QpCommand cmd, Firmware.Cmd c, int qpn) throws Refused {
        if (cmd == QpCommand.TO_RST) {
            errWithoutContext.clear(qpn);
            return 0;
        }
        if (cmd == QpCommand.TO_ERR && (c.inParam() == 0 || errWithoutContext.get(qpn))) {
            errWithoutContext.set(qpn);
            return 0;
        }
        if (cmd != QpCommand.RST2INIT && cmd != QpCommand.TO_ERR || errWithoutContext.get(qpn)) {
            throw new Refused(Mlx4Cmd.STAT_BAD_QP_STATE, String.format("QP 0x%x: %s_QP in state %s", qpn, cmd,
                    errWithoutContext.get(qpn) ? "ERR" : "RST"));
        }
        MemorySegment x = fw.inbox(c, QpContext.MAILBOX_SIZE).asSlice(QpContext.CONTEXT);
        MemQp q = create(qpn, x);
        org.peerdirect.hca.engine.QpContext ctx = q.hw.context();
        read(x, ctx);
        try {
            q.hw.modify(cmd, ctx);
        } catch (HwCommandException e) {
            q.hw.destroy();
            throw Tpt.refused(e);
        }
        qps.set(qpn, q);
        return 0;
    }

    /**
     * The device's QP from the context RST2INIT carries: checked field by field (nothing is
     * created when one is bad), then the engine's QP at {@code qpn} and its queues in memory.
     */
    private MemQp create(int qpn, MemorySegment x) throws Refused {
        int st = x.get(BE32, QpContext.FLAGS) >>> 16 & 0xff;
        if (st != QpContext.ST_RC && st != QpContext.ST_UD) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: service type 0x%x (RC 0x0 and UD 0x3 are built)", qpn, st));
        }
        if ((x.get(BE32, QpContext.LOCAL_QPN) & 0xff_ffff) != qpn) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: the context names QP 0x%x", qpn, x.get(BE32, QpContext.LOCAL_QPN)));
        }
        int pd = x.get(BE32, QpContext.PD) & 0xff_ffff;
        if (pd < Firmware.RSVD_PDS) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: PD %d is reserved", qpn, pd));
        }
        int uar = x.get(BE32, QpContext.USR_PAGE) & 0xff_ffff;
        if (uar < Firmware.RSVD_UARS || uar >= Uar.BF_BASE / Uar.PAGE_SIZE) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: UAR page %d (%d..%d)", qpn, uar, Firmware.RSVD_UARS,
                    Uar.BF_BASE / Uar.PAGE_SIZE - 1));
        }
        int srqWord = x.get(BE32, QpContext.SRQN);
        Srqs.MemSrq srq = null;
        if ((srqWord & QpContext.SRQN_USE_SRQ) != 0) {
            srq = fw.srqs.srq(srqWord & 0xff_ffff);
            if (srq == null) {
                throw new Refused(Mlx4Cmd.STAT_BAD_RESOURCE, String.format("QP 0x%x: SRQ %d is not in hardware ownership", qpn, srqWord & 0xff_ffff));
            }
        }
        HwCq scq = cq(qpn, x.get(BE32, QpContext.CQN_SEND) & 0xff_ffff);
        HwCq rcq = cq(qpn, x.get(BE32, QpContext.CQN_RECV) & 0xff_ffff);
        int sq = x.get(U8, QpContext.SQ_SIZE_STRIDE) & 0xff;
        int rq = x.get(U8, QpContext.RQ_SIZE_STRIDE) & 0xff;
        int logSq = sq >>> 3 & 0xf;
        int sqStride = 16 << (sq & 7);
        int logRq = srq != null ? -1 : rq >>> 3 & 0xf;
        int rqStride = 16 << (rq & 7);
        if (srq != null && rq != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: a receive queue (0x%x) and an SRQ", qpn, rq));
        }
        if (logSq > Firmware.LOG_MAX_WQES || logRq > Firmware.LOG_MAX_WQES || sqStride < 64 || sqStride > Integer.highestOneBit(
                Firmware.MAX_DESC_SZ_SQ - 1) << 1 || rqStride > Firmware.MAX_DESC_SZ_RQ) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SIZE, String.format("QP 0x%x: SQ of 2^%d WQEs of %d bytes, RQ of 2^%d of %d (QUERY_DEV_CAP: 2^%d "
                    + "WQEs, SQ WQEs of 64..%d bytes, RQ WQEs up to %d)", qpn, logSq, sqStride, logRq, rqStride, Firmware.LOG_MAX_WQES,
                    Firmware.MAX_DESC_SZ_SQ, Firmware.MAX_DESC_SZ_RQ));
        }
        if (x.get(U8, QpContext.LOG_PAGE_SIZE) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: buffer pages must be 4 KiB (log_page_size 0)", qpn));
        }
        long db = x.get(BE64, QpContext.DB_REC_ADDR);
        if (srq == null && (db & 3) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("QP 0x%x: doorbell record at 0x%x is not 4-byte aligned", qpn, db));
        }
        long sqBytes = (long) sqStride << logSq;
        long rqBytes = logRq < 0 ? 0 : (long) rqStride << logRq;
        // libmlx4's mlx4_alloc_qp_buf (and mlx4_ib's user QP): the queue of the larger stride first
        boolean rqFirst = rqBytes > 0 && rqStride > sqStride;
        long mtt = (long) (x.get(U8, QpContext.MTT_BASE_ADDR_H) & 0xff) << 32 | x.get(BE32, QpContext.MTT_BASE_ADDR_L) & 0xffff_ffffL;
        long[] pages = fw.icm.readMtt(mtt, (int) ((sqBytes + rqBytes + 4095) / 4096));
        QpCaps caps = new QpCaps(Math.min(1 << logSq, HcaDevice.MAX_QP_WR), logRq < 0 ? 0 : Math.min(1 << logRq, HcaDevice.MAX_QP_WR),
                Math.max(1, Math.min(HcaDevice.MAX_SGE, (sqStride - Wqe.CTRL_SIZE) / Wqe.DATA_SIZE)),
                logRq < 0 ? 0 : Math.min(HcaDevice.MAX_SGE, rqStride / Wqe.DATA_SIZE),
                Math.min(HcaDevice.MAX_INLINE, sqStride - Wqe.CTRL_SIZE), false);
        HwQp hw;
        try {
            hw = fw.engine().createQpAt(qpn, pd, st == QpContext.ST_UD ? HcaDevice.ST_UD : HcaDevice.ST_RC, caps, scq, rcq,
                    srq == null ? null : srq.hw);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        MemQp q = new MemQp(this, hw, st == QpContext.ST_UD, uar, pages, db, logSq, sqStride, rqFirst ? rqBytes : 0, logRq, rqStride,
                rqFirst ? 0 : sqBytes);
        if (hw.recvQueue() != null) {
            hw.recvQueue().fetcher(q::fetchRecv);
        }
        return q;
    }

    private HwCq cq(int qpn, int cqn) throws Refused {
        HwCq cq = cqn < HcaDevice.MAX_CQ ? fw.engine().cqByNumber(cqn) : null;
        if (cq == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RESOURCE, String.format("QP 0x%x: CQ %d is not in hardware ownership", qpn, cqn));
        }
        return cq;
    }

    /** The context's path and transport fields into the engine's QP context. */
    private static void read(MemorySegment x, org.peerdirect.hca.engine.QpContext ctx) {
        long p = QpContext.PRI_PATH;
        ctx.port = QpContext.port(x.get(U8, p + QpContext.PATH_SCHED_QUEUE) & 0xff);
        ctx.mtu = (x.get(U8, QpContext.MTU_MSGMAX) & 0xff) >>> 5;
        ctx.pkeyIndex = x.get(U8, p + QpContext.PATH_PKEY_INDEX) & 0xff;
        ctx.dlid = x.get(BE16, p + QpContext.PATH_RLID) & 0xffff;
        ctx.ackTimeout = (x.get(U8, p + QpContext.PATH_ACKTO) & 0xff) >>> 3;
        ctx.qkey = x.get(BE32, QpContext.QKEY);
        ctx.remoteQpn = x.get(BE32, QpContext.REMOTE_QPN) & 0xff_ffff;
        int params1 = x.get(BE32, QpContext.PARAMS1);
        int params2 = x.get(BE32, QpContext.PARAMS2);
        ctx.sraMax = 1 << (params1 >>> 21 & 7);
        ctx.retryCount = params1 >>> 16 & 7;
        ctx.rnrRetry = params1 >>> 13 & 7;
        ctx.rraMax = 1 << (params2 >>> 21 & 7);
        ctx.remoteAccess = params2 & (QpContext.PARAMS2_RRE | QpContext.PARAMS2_RWE | QpContext.PARAMS2_RAE);
        int rnr = x.get(BE32, QpContext.RNR_NEXTRECVPSN);
        ctx.minRnrTimer = rnr >>> 24 & 0x1f;
        ctx.rqPsn = rnr & 0xff_ffff;
        ctx.sqPsn = x.get(BE32, QpContext.NEXT_SEND_PSN) & 0xff_ffff;
    }

    /** {@code QUERY_QP}: the state and the context as the device keeps it (RST, or ERR, and nothing else without one). */
    private long query(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int qpn = qpn(c);
        MemQp q = qps.get(qpn);
        MemorySegment o = MemorySegment.ofArray(new byte[QpContext.MAILBOX_SIZE]);
        MemorySegment x = o.asSlice(QpContext.CONTEXT);
        if (q == null) {
            x.set(BE32, QpContext.FLAGS, (errWithoutContext.get(qpn) ? QpContext.STATE_ERR : QpContext.STATE_RST) << 28);
            x.set(BE32, QpContext.LOCAL_QPN, qpn);
            fw.outbox(c, o);
            return 0;
        }
        org.peerdirect.hca.engine.QpContext ctx = q.hw.context();
        int st = switch (q.hw.state()) {
            case RST -> QpContext.STATE_RST;
            case INIT -> QpContext.STATE_INIT;
            case RTR -> QpContext.STATE_RTR;
            case RTS -> QpContext.STATE_RTS;
            case SQER -> QpContext.STATE_SQER;
            case SQD -> QpContext.STATE_SQD;
            case ERR -> QpContext.STATE_ERR;
        };
        long p = QpContext.PRI_PATH;
        x.set(BE32, QpContext.FLAGS, st << 28 | (q.hw.serviceType() & 0xff) << 16);
        x.set(BE32, QpContext.PD, q.hw.pdn());
        x.set(U8, QpContext.MTU_MSGMAX, (byte) (ctx.mtu << 5 | 31));
        x.set(BE32, QpContext.USR_PAGE, q.uar);
        x.set(BE32, QpContext.LOCAL_QPN, q.qpn);
        x.set(BE32, QpContext.REMOTE_QPN, ctx.remoteQpn);
        x.set(U8, p + QpContext.PATH_SCHED_QUEUE, (byte) QpContext.schedQueue(ctx.port));
        x.set(U8, p + QpContext.PATH_PKEY_INDEX, (byte) ctx.pkeyIndex);
        x.set(BE16, p + QpContext.PATH_RLID, (short) ctx.dlid);
        x.set(U8, p + QpContext.PATH_ACKTO, (byte) (ctx.ackTimeout << 3));
        x.set(BE32, QpContext.PARAMS1, log2(ctx.sraMax) << 21 | ctx.retryCount << 16 | ctx.rnrRetry << 13);
        x.set(BE32, QpContext.PARAMS2, log2(ctx.rraMax) << 21 | ctx.remoteAccess & 0xe000);
        x.set(BE32, QpContext.RNR_NEXTRECVPSN, ctx.minRnrTimer << 24 | ctx.rqPsn & 0xff_ffff);
        x.set(BE32, QpContext.NEXT_SEND_PSN, ctx.sqPsn & 0xff_ffff);
        x.set(BE32, QpContext.QKEY, ctx.qkey);
        fw.outbox(c, o);
        return 0;
    }

    private static int log2(int n) {
        return n <= 1 ? 0 : Math.min(7, 32 - Integer.numberOfLeadingZeros(n - 1)); // fls(n - 1), as the kernel encodes it
    }

    /**
     * A receive WQE's data segments from byte {@code from} to {@code end} of {@code wqe} into the
     * engine's slot, up to the first {@code INVALID_LKEY} (the list's end) or the slot's room.
     */
    static void scatter(MemorySegment wqe, int from, int end, RecvWqe w) {
        w.numSge = 0;
        for (int o = from; o + Wqe.DATA_SIZE <= end && w.numSge < w.addr.length; o += Wqe.DATA_SIZE) {
            int lkey = wqe.get(BE32, o + Wqe.DATA_LKEY);
            if (lkey == Wqe.INVALID_LKEY) {
                break;
            }
            w.byteCount[w.numSge] = wqe.get(BE32, o + Wqe.DATA_BYTE_COUNT);
            w.lkey[w.numSge] = lkey;
            w.addr[w.numSge] = wqe.get(BE64, o + Wqe.DATA_ADDR);
            w.numSge++;
        }
    }
}
