package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.PageFault;
import org.peerdirect.hca.engine.QpCaps;
import org.peerdirect.hca.engine.QpCommand;
import org.peerdirect.hca.engine.QpContext;

/**
 * Queue pairs ({@code CREATE_QP}, the transition commands, {@code QUERY_QP}, {@code DESTROY_QP},
 * and the send doorbells: a BlueFlame register's 8-byte write or a whole WQE written combined;
 * the driver side is {@code mlx5_ib}'s {@code qp.c} and {@code mlx5_core}'s {@code qp.c}). A QP's
 * buffer, doorbell record and WQE fetch are its {@link MemQp}; its context (512 B) lives in the
 * firmware's pages.
 *
 * <p>Lock rules: {@link #qps} is an atomic array written by the firmware thread and read by
 * doorbell and engine threads; a QP's send fetch is serialised by its {@link MemQp#sqLock}.
 */
final class Qps {

    static final int QP_CONTEXT_BYTES = 512;

    private final DataPath dp;
    private final Allocations allocations;
    private final Caps caps;
    private final FirmwarePages pages;
    private final Umems umems;
    private final Cqs cqs;
    private final Srqs srqs;
    private final AtomicReferenceArray<MemQp> qps = new AtomicReferenceArray<>(HcaDevice.MAX_QP);
    /** What destroyed QPs counted (WQEs fetched, of those carried by BlueFlame), moved here as a QP leaves the table, just before. */
    private final AtomicLong retiredWqes = new AtomicLong();
    private final AtomicLong retiredBlueFlame = new AtomicLong();

    Qps(DataPath dp, Allocations allocations, Caps caps, FirmwarePages pages, Umems umems, Cqs cqs, Srqs srqs) {
        this.umems = umems;
        this.dp = dp;
        this.allocations = allocations;
        this.caps = caps;
        this.pages = pages;
        this.cqs = cqs;
        this.srqs = srqs;
    }

    void register(CommandTable t) {
        // a QP in a umem (wq_umem_valid) carries no pas list
        t.add(Mlx5Cmd.CREATE_QP, CommandTable.withList(Qp.CREATE_QP_IN_PAS, in -> in.byteSize() >= Qp.CREATE_QP_IN_PAS
                && Devx.QP_WQ_UMEM_VALID.get(in, 0) != 0 ? 0 : qpPages(in)), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createQp(in, out, caps.cur(HcaCap.LOG_MAX_QP_SZ)));
        for (int op : new int[] { Mlx5Cmd.RST2INIT_QP, Mlx5Cmd.INIT2INIT_QP, Mlx5Cmd.INIT2RTR_QP, Mlx5Cmd.RTR2RTS_QP, Mlx5Cmd.RTS2RTS_QP,
                Mlx5Cmd.SQERR2RTS_QP }) {
            t.add(op, Qp.MODIFY_IN_LEN, CommandTable.MIN_OUTPUT, (opMod, in, out) -> modifyQp(op, in));
        }
        t.add(Mlx5Cmd.QP_2ERR, (opMod, in, out) -> modifyQp(Mlx5Cmd.QP_2ERR, in));
        t.add(Mlx5Cmd.QP_2RST, (opMod, in, out) -> modifyQp(Mlx5Cmd.QP_2RST, in));
        t.add(Mlx5Cmd.QUERY_QP, CommandTable.MIN_INPUT, Qp.QUERY_OUT_LEN, (opMod, in, out) -> queryQp(in, out));
        t.add(Mlx5Cmd.DESTROY_QP, (opMod, in, out) -> destroyQp(in));
    }

    int count() {
        return dp.engine.qps().size();
    }

    /** Send and receive WQEs fetched by every QP so far (SRQs count their own). */
    long wqesFetched() {
        return retiredWqes.get() + DataPath.sum(qps, q -> q.sqWqes.get() + q.rqWqesFetched.get());
    }

    long wqesBlueFlame() {
        return retiredBlueFlame.get() + DataPath.sum(qps, q -> q.sqWqesBlueFlame.get());
    }

    private void retire(MemQp q) {
        retiredWqes.addAndGet(q.sqWqes.get() + q.rqWqesFetched.get());
        retiredBlueFlame.addAndGet(q.sqWqesBlueFlame.get());
    }

    /** Force close: every QP dropped (the engine was reset first: flushed and freed). */
    void dropAll() {
        for (int i = 0; i < qps.length(); i++) {
            MemQp q = qps.get(i);
            if (q != null) {
                retire(q);
                qps.set(i, null);
            }
        }
    }

    /**
     * The {@code wqe_counter} of a CQE: a receive from an SRQ reports the SRQ's WQE index (an XRC
     * target has no SRQ of its own: the CQE names the one the message did), a QP's completion the
     * WQE's place as its queue counts (the send queue's basic blocks, the receive queue's WQEs).
     */
    int cqeWqeCounter(Cqe c) {
        MemQp q = qps.get(c.qpn);
        Srqs.MemSrq fromSrq = !c.isSend && c.srqn != 0 ? srqs.srq(c.srqn) : null;
        return fromSrq != null ? fromSrq.wqeIndex(c.wqeIndex)
                : q == null ? (int) c.wqeIndex : c.isSend ? q.sqWqeCounter(c.wqeIndex) : q.rqWqeCounter(c.wqeIndex);
    }

    /** Pages of a QP's buffer: the RQ (2^log_rq_size × 16 << log_rq_stride bytes), then the SQ (2^log_sq_size × 64). */
    static int qpPages(MemorySegment in) {
        long c = Qp.IN_QPC;
        long rq = Qp.QPC_RQ_TYPE.get(in, c) == Qp.RQ_REGULAR ? (1L << Math.min(15, Qp.QPC_LOG_RQ_SIZE.get(in, c))) << 4 + Qp.QPC_LOG_RQ_STRIDE.get(in, c) : 0;
        long sq = Qp.QPC_NO_SQ.get(in, c) != 0 ? 0 : (1L << Math.min(15, Qp.QPC_LOG_SQ_SIZE.get(in, c))) * Qp.SEND_WQE_BB;
        return (int) ((rq + sq + 4095) / 4096);
    }

    /** The engine's service type of a QPC's {@code st}, checked with {@code pm_state} (no APM). */
    private static int engineServiceType(MemorySegment in, long c) throws Refused {
        int st = Qp.QPC_ST.get(in, c);
        int engineSt = switch (st) {
            case Qp.ST_RC -> HcaDevice.ST_RC;
            case Qp.ST_UD -> HcaDevice.ST_UD;
            case Qp.ST_REG_UMR -> HcaDevice.ST_REG_UMR;
            case Qp.ST_XRC -> HcaDevice.ST_XRC;
            default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "QP service type 0x" + Integer.toHexString(st)
                    + " is not built in the model (RC 0x0, UD 0x2, XRC 0x3 and REG_UMR 0xc are)");
        };
        if (Qp.QPC_PM_STATE.get(in, c) != Qp.PM_MIGRATED) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "pm_state must be MIGRATED (3): the model has no APM");
        }
        return engineSt;
    }

    void createQp(MemorySegment in, MemorySegment out, int maxLogQpSz) throws Refused, CommandQueue.Deferred {
        long c = Qp.IN_QPC;
        int engineSt = engineServiceType(in, c);
        int st = Qp.QPC_ST.get(in, c);
        int rqType = Qp.QPC_RQ_TYPE.get(in, c);
        if (rqType != Qp.RQ_REGULAR && rqType != Qp.RQ_ZERO_LEN && rqType != Srq.RQ_SRQ) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "rq_type " + rqType + " is not built in the model (regular 0, SRQ 1, "
                    + "zero-length 3 are)");
        }
        if (st == Qp.ST_REG_UMR && rqType != Qp.RQ_ZERO_LEN) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "a REG_UMR QP only sends: rq_type must be zero-length (3)");
        }
        boolean xrc = st == Qp.ST_XRC;
        boolean xrcTarget = xrc && Qp.QPC_NO_SQ.get(in, c) != 0;
        int xrcd = Qp.QPC_XRCD.get(in, c);
        if (xrc) {
            allocations.useXrcd(xrcd);
        }
        if (xrc && rqType == Qp.RQ_REGULAR) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "an XRC QP has no receive queue of its own (rq_type SRQ 1 or zero-length 3)");
        }
        Srqs.MemSrq srq = null;
        // an XRC QP's srqn (the driver's internal SRQ, mlx5_ib's devr->s0) receives nothing: not read
        if (rqType == Srq.RQ_SRQ && !xrc) {
            int srqn = Srq.QPC_SRQN.get(in, c);
            srq = srqs.srq(srqn);
            if (srq == null) {
                throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "srqn 0x" + Integer.toHexString(srqn)
                        + " names no SRQ");
            }
            allocations.uctxs.checkUse(Uctxs.Kind.SRQ, srqn, "srqn 0x" + Integer.toHexString(srqn));
        }
        int logSq = Qp.QPC_LOG_SQ_SIZE.get(in, c);
        int logRq = Qp.QPC_LOG_RQ_SIZE.get(in, c);
        int rqStride = 16 << Qp.QPC_LOG_RQ_STRIDE.get(in, c);
        if (logSq > maxLogQpSz || logRq > maxLogQpSz || Qp.QPC_NO_SQ.get(in, c) != 0 && !xrcTarget) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "log_sq_size " + logSq + " / log_rq_size " + logRq
                    + " above log_max_qp_sz " + maxLogQpSz + ", or no_sq on a QP other than an XRC target (not built)");
        }
        if (Qp.QPC_LOG_PAGE_SIZE.get(in, c) != 0 || Qp.QPC_PAGE_OFFSET.get(in, c) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "the model takes QP buffers in 4 KiB pages at offset 0");
        }
        int uar = Qp.QPC_UAR_PAGE.get(in, c);
        allocations.useUar(uar);
        int pd = Qp.QPC_PD.get(in, c);
        if (!xrcTarget) { // an XRC target's PD (mlx5_ib's devr->p0) checks nothing: the SRQ's PD does
            allocations.usePd(pd);
        }
        // an XRC initiator completes only sends, a target nothing: their receive CQ (and a target's send CQ) are not read
        Cqs.MemCq scq = xrcTarget ? null : cqs.useCq(Qp.QPC_CQN_SND.get(in, c));
        Cqs.MemCq rcq = xrc ? null : cqs.useCq(Qp.QPC_CQN_RCV.get(in, c));
        long dbrAddr = in.get(BE64, c + Qp.QPC_DBR_ADDR);
        if ((dbrAddr & 7) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, String.format("dbr_addr 0x%x is not 8-byte aligned", dbrAddr));
        }
        QueueMemory[] mem = queueMemory(in, dbrAddr);
        FirmwarePages.Slot ctx;
        try {
            ctx = pages.store(QP_CONTEXT_BYTES, in, c, Qp.QPC_SIZE, "a context");
        } catch (Refused | CommandQueue.Deferred e) {
            mem[0].release();
            mem[1].release();
            throw e;
        }
        int rqWqes = rqType == Qp.RQ_REGULAR ? 1 << logRq : 0;
        HwQp hw;
        try {
            QpCaps qpCaps = new QpCaps(1 << logSq, rqWqes, HcaDevice.MAX_SGE, Math.max(1, rqStride / Qp.DS_SIZE), MemQp.MAX_INLINE, false);
            hw = xrc ? dp.engine.createXrcQp(pd, xrcd, xrcTarget, qpCaps, scq == null ? null : scq.hw)
                    : dp.engine.createQp(pd, engineSt, qpCaps, scq.hw, rcq.hw, srq == null ? null : srq.hw);
        } catch (HwCommandException e) {
            pages.free(ctx);
            mem[0].release();
            mem[1].release();
            throw Refused.of(e);
        }
        MemQp q = new MemQp(dp, hw, st, mem[0], mem[1], uar, logSq, rqWqes, rqStride, ctx, srq);
        if (hw.recvQueue() != null) {
            hw.recvQueue().fetcher(q::fetchRecv);
        }
        q.ctx.port = Math.max(1, Qp.QPC_PRI_VHCA_PORT_NUM.get(in, c));
        qps.set(hw.qpn, q);
        allocations.uctxs.own(Uctxs.Kind.QP, hw.qpn);
        Pages.INDEX24.set(out, 0, hw.qpn);
    }

    /**
     * The QP's work queue and doorbell record: in the {@code pas} list and at {@code dbr_addr}, or
     * in umems ({@code wq_umem_valid}: {@code wq_umem_id} from {@code wq_umem_offset};
     * {@code dbr_umem_valid}: {@code dbr_umem_id} with {@code dbr_addr} the offset in it).
     */
    private QueueMemory[] queueMemory(MemorySegment in, long dbrAddr) throws Refused {
        long c = Qp.IN_QPC;
        long bytes = 4096L * qpPages(in);
        QueueMemory wq;
        if (Devx.QP_WQ_UMEM_VALID.get(in, 0) != 0) {
            wq = umems.umem(in.get(BE32, Devx.QP_WQ_UMEM_ID), "CREATE_QP's work queue").region(in.get(BE64, Devx.QP_WQ_UMEM_OFFSET), bytes,
                    "the QP's work queue");
        } else {
            wq = QueueMemory.pas(dp.port, DataPath.pas(in, Qp.CREATE_QP_IN_PAS, qpPages(in), "QP"));
        }
        if (Devx.QPC_DBR_UMEM_VALID.get(in, c) == 0) {
            return new QueueMemory[] {wq, QueueMemory.at(dp.port, dbrAddr, 8)};
        }
        try {
            return new QueueMemory[] {wq, umems.umem(Devx.QPC_DBR_UMEM_ID.get(in, c), "CREATE_QP's doorbell record").record(dbrAddr, 8,
                    "the QP's doorbell record")};
        } catch (Refused r) {
            wq.release();
            throw r;
        }
    }

    private MemQp liveQp(int qpn) throws Refused {
        MemQp q = qpn > 0 && qpn < qps.length() ? qps.get(qpn) : null;
        if (q == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "QP 0x" + Integer.toHexString(qpn) + " does not exist");
        }
        allocations.uctxs.check(Uctxs.Kind.QP, qpn, "QP 0x" + Integer.toHexString(qpn));
        return q;
    }

    /** The transition commands: the QPC's fields into the engine's context, then the engine's state machine. */
    void modifyQp(int opcode, MemorySegment in) throws Refused {
        MemQp q = liveQp(Pages.INDEX24.get(in, 0));
        QpCommand cmd = switch (opcode) {
            case Qp.RST2INIT_QP -> QpCommand.RST2INIT;
            case Qp.INIT2INIT_QP -> QpCommand.INIT2INIT;
            case Qp.INIT2RTR_QP -> QpCommand.INIT2RTR;
            case Qp.RTR2RTS_QP -> QpCommand.RTR2RTS;
            case Qp.RTS2RTS_QP -> QpCommand.RTS2RTS;
            case Qp.SQERR2RTS_QP -> QpCommand.SQERR2RTS;
            case Qp.QP_2ERR -> QpCommand.TO_ERR;
            default -> QpCommand.TO_RST;
        };
        QpContext ctx = q.ctx.copy();
        if (cmd != QpCommand.TO_ERR && cmd != QpCommand.TO_RST) {
            long c = Qp.IN_QPC;
            int portNum = Qp.QPC_PRI_VHCA_PORT_NUM.get(in, c);
            ctx.port = portNum == 0 ? ctx.port : portNum;
            ctx.pkeyIndex = Qp.QPC_PRI_PKEY_INDEX.get(in, c);
            ctx.qkey = Qp.QPC_Q_KEY.get(in, c);
            ctx.remoteAccess = (Qp.QPC_RRE.get(in, c) != 0 ? QpContext.BIT_RRE : 0) | (Qp.QPC_RWE.get(in, c) != 0 ? QpContext.BIT_RWE : 0)
                    | (Qp.QPC_RAE.get(in, c) != 0 ? QpContext.BIT_RAE : 0)
                    | (Qp.QPC_FLUSH_GLOBAL.get(in, c) != 0 ? QpContext.BIT_FLUSH_GLOBAL : 0)
                    | (Qp.QPC_FLUSH_PERSISTENT.get(in, c) != 0 ? QpContext.BIT_FLUSH_PERSISTENT : 0);
            if (cmd == QpCommand.INIT2RTR) {
                ctx.mtu = Qp.QPC_MTU.get(in, c) == 0 ? ctx.mtu : Qp.QPC_MTU.get(in, c); // UD QPs may leave it 0
                ctx.remoteQpn = Qp.QPC_REMOTE_QPN.get(in, c);
                boolean grh = Qp.QPC_PRI_GRH.get(in, c) != 0;
                if (dp.engine.ethernet() && !grh && (q.st == Qp.ST_RC || q.st == Qp.ST_XRC)) {
                    // RoCE has no LIDs: a connected QP's path is its peer's GID, or nothing
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "the port is Ethernet (RoCE): the primary path needs grh=1 and the remote GID");
                }
                int sgidIndex = Qp.QPC_PRI_SRC_ADDR_INDEX.get(in, c);
                if (dp.engine.ethernet() && grh && sgidIndex != 0) {
                    // the table's GID 1 (IPv6 link-local) is reported, but the port builds IPv4 frames
                    // from GID 0 only: refused rather than sent from another GID than the QP names
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "source GID index " + sgidIndex
                            + ": this RoCE port sends from GID 0 (IPv4-mapped) only; RoCE over IPv6 is not modelled");
                }
                // InfiniBand routes by the DLID inside the subnet (a GRH is for routers); RoCE by the GID
                ctx.dlid = !dp.engine.ethernet() ? Qp.QPC_PRI_RLID.get(in, c) : grh ? Roce.lidOfGid(in, c + Qp.QPC_PRI_RGID) : 0;
                if (grh) { // the path's GID: what a port on a wire sends to
                    MemorySegment.copy(in, java.lang.foreign.ValueLayout.JAVA_BYTE, c + Qp.QPC_PRI_RGID, ctx.rgid, 0, 16);
                }
                ctx.rqPsn = Qp.QPC_NEXT_RCV_PSN.get(in, c);
                ctx.minRnrTimer = Qp.QPC_MIN_RNR_NAK.get(in, c);
                ctx.rraMax = 1 << Qp.QPC_LOG_RRA_MAX.get(in, c);
            }
            if (cmd == QpCommand.RTR2RTS || cmd == QpCommand.SQERR2RTS) {
                ctx.sqPsn = Qp.QPC_NEXT_SEND_PSN.get(in, c);
                ctx.retryCount = Qp.QPC_RETRY_COUNT.get(in, c);
                ctx.rnrRetry = Qp.QPC_RNR_RETRY.get(in, c);
                ctx.ackTimeout = Qp.QPC_PRI_ACK_TIMEOUT.get(in, c);
                ctx.sraMax = 1 << Qp.QPC_LOG_SRA_MAX.get(in, c);
            }
        }
        try {
            q.hw.modify(cmd, ctx);
        } catch (HwCommandException e) {
            throw Refused.of(e);
        }
        q.ctx = ctx;
        if (cmd == QpCommand.TO_RST) {
            q.reset();
        }
    }

    void queryQp(MemorySegment in, MemorySegment out) throws Refused {
        MemQp q = liveQp(Pages.INDEX24.get(in, 0));
        pages.load(q.context, out, Qp.QUERY_OUT_QPC, Qp.QPC_SIZE, "QP");
        long c = Qp.QUERY_OUT_QPC;
        QpContext ctx = q.hw.context();
        Qp.QPC_STATE.set(out, c, switch (q.hw.state()) {
            case RST -> Qp.STATE_RST;
            case INIT -> Qp.STATE_INIT;
            case RTR -> Qp.STATE_RTR;
            case RTS -> Qp.STATE_RTS;
            case SQER -> Qp.STATE_SQER;
            case SQD -> Qp.STATE_SQD;
            default -> Qp.STATE_ERR;
        });
        Qp.QPC_NEXT_SEND_PSN.set(out, c, ctx.sqPsn);
        Qp.QPC_NEXT_RCV_PSN.set(out, c, ctx.rqPsn);
        Qp.QPC_REMOTE_QPN.set(out, c, ctx.remoteQpn);
        Qp.QPC_PRI_RLID.set(out, c, ctx.dlid);
        Qp.QPC_Q_KEY.set(out, c, ctx.qkey);
        Qp.QPC_MTU.set(out, c, ctx.mtu);
        Qp.QPC_HW_SQ_WQEBB_COUNTER.set(out, c, q.sqFetched & 0xffff);
        Qp.QPC_HW_RQ_COUNTER.set(out, c, q.rqFetched);
    }

    void destroyQp(MemorySegment in) throws Refused {
        MemQp q = liveQp(Pages.INDEX24.get(in, 0));
        q.hw.destroy(); // waits until no WQE of it is executing
        retire(q);
        qps.set(q.hw.qpn, null);
        allocations.uctxs.release(Uctxs.Kind.QP, q.hw.qpn);
        q.wq.release();
        q.dbr.release();
        pages.free(q.context);
    }

    /**
     * A write to a BlueFlame register: the first 8 bytes of a WQE's control segment (raw bytes in
     * {@code value}). The device takes the QPN from it and fetches what the doorbell record shows.
     */
    boolean sqDoorbell(int uar, long value) {
        MemQp q = qpOfDoorbell(uar, (int) Long.reverseBytes(value));
        if (q == null) {
            return false;
        }
        q.fetchSend(null, 0, 0);
        return true;
    }

    /**
     * A write-combined burst into a BlueFlame register: a whole send WQE (libmlx5's
     * {@code mlx5_bf_copy} for a single post). The device takes the WQE from the burst instead of
     * reading it by DMA, and its WQE index and DS count stand for the doorbell record: it fetches
     * up to the end of that WQE (the blocks before it, if any, from memory).
     */
    boolean sqBlueFlame(int uar, MemorySegment payload, long offset, int length) {
        MemQp q = qpOfDoorbell(uar, payload.get(BE32, offset + Qp.CTRL_QPN_DS));
        if (q == null) {
            return false;
        }
        q.fetchSend(payload, offset, length);
        return true;
    }

    /** Whether QP {@code qpn} exists (any thread). */
    boolean exists(int qpn) {
        return qpn > 0 && qpn < qps.length() && qps.get(qpn) != null;
    }

    /** {@code SXD_DB} from a DPA outbox: QP {@code qpn}'s send queue up to producer index {@code pi}; false when there is no such QP. */
    boolean sqDoorbellPi(int qpn, int pi) {
        MemQp q = qpn > 0 && qpn < qps.length() ? qps.get(qpn) : null;
        if (q == null) {
            return false;
        }
        q.fetchSend(null, 0, 0, pi);
        return true;
    }

    /** The QP a doorbell's {@code qpn_ds} word names, if it is on UAR page {@code uar}. */
    private MemQp qpOfDoorbell(int uar, int qpnDs) {
        int qpn = qpnDs >>> 8;
        MemQp q = qpn > 0 && qpn < qps.length() ? qps.get(qpn) : null;
        return q == null || q.uar != uar ? null : q;
    }

    /**
     * The {@code wqe_index} a WQE page fault reports: the engine's slot as the driver counts WQEs
     * (the send queue's basic-block counter, the receive queue's WQE counter, the SRQ's buffer
     * index); 0 for an RDMA fault or a queue gone meanwhile.
     */
    int faultWqeIndex(PageFault f) {
        if (f.wqeIndex() < 0) {
            return 0;
        }
        if ((f.flags() & PageFault.FLAG_SRQ) != 0) {
            Srqs.MemSrq s = srqs.srq(f.wqNum());
            return s == null ? 0 : s.wqeIndex(f.wqeIndex());
        }
        MemQp q = f.wqNum() >= 0 && f.wqNum() < qps.length() ? qps.get(f.wqNum()) : null;
        if (q == null) {
            return 0;
        }
        return f.requestor() ? q.sqWqeCounter(f.wqeIndex()) : q.rqWqeCounter(f.wqeIndex());
    }
}
