package org.peerdirect.flexio.impl;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.DpaObj;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * The PRM commands libflexio sends through DevX ({@code mlx5dv_devx_obj_*}), built as bytes with
 * the layouts {@code hca-sim} exports ({@code mlx5_ifc.h}, and {@link DpaObj}: the peerdirect PRM
 * extension v1 for the DPA objects). The driver stamps the context's uid; nothing here sets one.
 */
public final class Prm {

    /** Bytes of a general object command's output: the header and the object's context. */
    public static final int OBJ_OUT = Devx.GENERAL_OBJ_HDR + DpaObj.CONTEXT_SIZE;

    private Prm() {
    }

    static MemorySegment input(int opcode, int opMod, int len) {
        MemorySegment in = MemorySegment.ofArray(new byte[len]);
        in.set(BE32, 0, opcode << 16);
        in.set(BE32, 4, opMod & 0xffff);
        return in;
    }

    /** The object number of a create command's output ({@code pdn}, {@code cqn}, {@code qpn}, mkey index). */
    public static int index(DevxObj o) {
        return Pages.INDEX24.get(o.out(), 0);
    }

    // ------------------------------------------------------------------ general objects (the DPA's)

    /** A general-object command on {@code type}/{@code id}; {@code ctx} fills the object's context. */
    public static MemorySegment general(int opcode, int type, int id, Consumer<MemorySegment> ctx) {
        MemorySegment in = input(opcode, 0, Devx.GENERAL_OBJ_HDR + DpaObj.CONTEXT_SIZE);
        Devx.OBJ_TYPE.set(in, 0, type);
        in.set(BE32, Devx.OBJ_ID, id);
        ctx.accept(in.asSlice(Devx.GENERAL_OBJ_HDR));
        return in;
    }

    /** {@code CREATE_GENERAL_OBJECT}: the object, its id in {@link #objId}. */
    public static DevxObj create(IbvContext ctx, int type, Consumer<MemorySegment> fill) {
        return Mlx5dv.devxObjCreate(ctx, general(Mlx5Cmd.CREATE_GENERAL_OBJECT, type, 0, fill), OBJ_OUT);
    }

    /** The syndrome of a DPA_PROCESS whose image the DPA's loader or verifier refused (peerdirect PRM extension v1). */
    public static final int SYND_DPA_IMAGE = 0x0bad_0302;

    /** {@code CREATE_GENERAL_OBJECT} of a DPA_PROCESS; an image refused by the loader is said so. */
    public static DevxObj createProcess(IbvContext ctx, Consumer<MemorySegment> fill) {
        try {
            return create(ctx, DpaObj.OBJ_DPA_PROCESS, fill);
        } catch (org.peerdirect.kernel.mm.KernelException e) {
            if (e.getMessage() != null && e.getMessage().contains("syndrome (0x" + Integer.toHexString(SYND_DPA_IMAGE) + ")")) {
                throw new FlexioFailure(FlexioFailure.FAILED, "the DPA's loader refused the image (a verifier rule or a"
                        + " malformed image): " + e.getMessage());
            }
            throw e;
        }
    }

    public static int objId(DevxObj o) {
        return o.out().get(BE32, Devx.OBJ_ID);
    }

    /** The context a create command returned. */
    public static MemorySegment createdContext(DevxObj o) {
        return o.out().asSlice(Devx.GENERAL_OBJ_HDR);
    }

    /** {@code QUERY_GENERAL_OBJECT}: the object's context. */
    public static MemorySegment query(DevxObj o, int type) {
        return Mlx5dv.devxObjQuery(o, general(Mlx5Cmd.QUERY_GENERAL_OBJECT, type, objId(o), c -> { }), OBJ_OUT)
                .asSlice(Devx.GENERAL_OBJ_HDR);
    }

    /** {@code MODIFY_GENERAL_OBJECT} of a DPA thread's state (run, or the host's trigger). */
    public static void threadState(DevxObj thread, int state) {
        Mlx5dv.devxObjModify(thread, general(Mlx5Cmd.MODIFY_GENERAL_OBJECT, DpaObj.OBJ_DPA_THREAD, objId(thread), c -> {
            DpaObj.THREAD_MODIFY_SELECT.set(c, 0, DpaObj.THREAD_SELECT_STATE);
            DpaObj.THREAD_STATE.set(c, 0, state);
        }), OBJ_OUT);
    }

    // ------------------------------------------------------------------ PD, CQ, QP, mkey

    /** {@code ALLOC_PD}. */
    public static DevxObj allocPd(IbvContext ctx) {
        return Mlx5dv.devxObjCreate(ctx, input(Mlx5Cmd.ALLOC_PD, 0, 16), 16);
    }

    /**
     * {@code CREATE_CQ} of {@code 2^logSize} 64-byte CQEs, the ring at {@code ringOffset} and the
     * doorbell record at {@code dbrOffset} of umem {@code umem}; its element an EQ ({@code eqnOrThread}
     * an EQ number) or, when {@code dpaThread}, the DPA thread of that object id ({@code apu_cq}).
     */
    public static MemorySegment createCq(int logSize, int uar, int eqnOrThread, boolean dpaThread, int umem, long ringOffset,
            long dbrOffset) {
        MemorySegment in = input(Mlx5Cmd.CREATE_CQ, 0, (int) Cq.CREATE_CQ_IN_PAS);
        long c = Cq.CREATE_CQ_IN_CQC;
        Cq.CQC_LOG_CQ_SIZE.set(in, c, logSize);
        Cq.CQC_UAR_PAGE.set(in, c, uar);
        Cq.CQC_C_EQN.set(in, c, eqnOrThread);
        if (dpaThread) {
            Devx.CQC_APU_CQ.set(in, c, 1);
            Devx.CQC_APU_ELEMENT_TYPE.set(in, c, Devx.APU_ELEMENT_THREAD);
        }
        Devx.CQ_UMEM_VALID.set(in, 0, 1);
        in.set(BE32, Devx.CQ_UMEM_ID, umem);
        in.set(BE64, Devx.CQ_UMEM_OFFSET, ringOffset);
        Devx.CQC_DBR_UMEM_VALID.set(in, c, 1);
        Devx.CQC_DBR_UMEM_ID.set(in, c, umem);
        in.set(BE64, c + Cq.CQC_DBR_ADDR, dbrOffset);
        return in;
    }

    /**
     * {@code CREATE_QP} of an RC QP: {@code 2^logSq} send WQE blocks after {@code 2^logRq} receive
     * WQEs of {@code 16 << logStride} bytes, the work queue at {@code wqOffset} and the doorbell
     * record at {@code dbrOffset} of umem {@code umem}.
     */
    public static MemorySegment createRcQp(int pd, int uar, int scq, int rcq, int logSq, int logRq, int logStride, int umem,
            long wqOffset, long dbrOffset) {
        MemorySegment in = input(Mlx5Cmd.CREATE_QP, 0, (int) Qp.CREATE_QP_IN_PAS);
        long q = Qp.IN_QPC;
        Qp.QPC_ST.set(in, q, Qp.ST_RC);
        Qp.QPC_PM_STATE.set(in, q, Qp.PM_MIGRATED);
        Qp.QPC_PD.set(in, q, pd);
        Qp.QPC_RQ_TYPE.set(in, q, Qp.RQ_REGULAR);
        Qp.QPC_LOG_RQ_SIZE.set(in, q, logRq);
        Qp.QPC_LOG_RQ_STRIDE.set(in, q, logStride);
        Qp.QPC_LOG_SQ_SIZE.set(in, q, logSq);
        Qp.QPC_UAR_PAGE.set(in, q, uar);
        Qp.QPC_CQN_SND.set(in, q, scq);
        Qp.QPC_CQN_RCV.set(in, q, rcq);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(in, q, 1);
        Devx.QP_WQ_UMEM_VALID.set(in, 0, 1);
        in.set(BE32, Devx.QP_WQ_UMEM_ID, umem);
        in.set(BE64, Devx.QP_WQ_UMEM_OFFSET, wqOffset);
        Devx.QPC_DBR_UMEM_VALID.set(in, q, 1);
        Devx.QPC_DBR_UMEM_ID.set(in, q, umem);
        in.set(BE64, q + Qp.QPC_DBR_ADDR, dbrOffset);
        return in;
    }

    /**
     * RESET → INIT → RTR → RTS of RC QP {@code qp} towards {@code remoteQpn} at {@code rgid} (RoCE:
     * the path has a GRH), remote reads, writes and atomics enabled.
     */
    public static void connectRc(DevxObj qp, int qpn, int remoteQpn, byte[] rgid, int rqPsn, int sqPsn) {
        MemorySegment init = modifyQp(Qp.RST2INIT_QP, qpn);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(init, Qp.IN_QPC, 1);
        rights(init);
        Mlx5dv.devxObjModify(qp, init, 16);
        MemorySegment rtr = modifyQp(Qp.INIT2RTR_QP, qpn);
        rights(rtr);
        Qp.QPC_MTU.set(rtr, Qp.IN_QPC, 3);
        Qp.QPC_REMOTE_QPN.set(rtr, Qp.IN_QPC, remoteQpn);
        Qp.QPC_PRI_GRH.set(rtr, Qp.IN_QPC, 1);
        Qp.QPC_PRI_HOP_LIMIT.set(rtr, Qp.IN_QPC, 64);
        MemorySegment.copy(MemorySegment.ofArray(rgid), 0, rtr, Qp.IN_QPC + Qp.QPC_PRI_RGID, 16);
        Qp.QPC_MIN_RNR_NAK.set(rtr, Qp.IN_QPC, 12);
        Mlx5dv.devxObjModify(qp, rtr, 16);
        MemorySegment rts = modifyQp(Qp.RTR2RTS_QP, qpn);
        rights(rts);
        Qp.QPC_RETRY_COUNT.set(rts, Qp.IN_QPC, 3);
        Qp.QPC_RNR_RETRY.set(rts, Qp.IN_QPC, 7);
        Qp.QPC_PRI_ACK_TIMEOUT.set(rts, Qp.IN_QPC, 14);
        Mlx5dv.devxObjModify(qp, rts, 16);
    }

    /**
     * One transition of RC QP {@code qp} ({@code Qp.RST2INIT_QP}, {@code INIT2RTR_QP},
     * {@code RTR2RTS_QP}, {@code QP_2ERR}, {@code QP_2RST}) with the QPC fields {@code qpc} sets
     * (offsets from the input's QPC, layout {@code Qp}): DOCA verbs' modify, attribute by attribute.
     */
    public static void modifyRc(DevxObj qp, int opcode, int qpn, Consumer<MemorySegment> qpc) {
        MemorySegment in = modifyQp(opcode, qpn);
        qpc.accept(in.asSlice(Qp.IN_QPC, Qp.QPC_SIZE));
        Mlx5dv.devxObjModify(qp, in, 16);
    }

    /** {@code QUERY_QP} of {@code qp}: its QPC as the device holds it (layout {@code Qp}). */
    public static MemorySegment queryQp(DevxObj qp, int qpn) {
        MemorySegment in = input(Qp.QUERY_QP, 0, 16);
        Pages.INDEX24.set(in, 0, qpn);
        return Mlx5dv.devxObjQuery(qp, in, Qp.QUERY_OUT_LEN).asSlice(Qp.QUERY_OUT_QPC, Qp.QPC_SIZE);
    }

    private static void rights(MemorySegment in) {
        Qp.QPC_RWE.set(in, Qp.IN_QPC, 1);
        Qp.QPC_RRE.set(in, Qp.IN_QPC, 1);
        Qp.QPC_RAE.set(in, Qp.IN_QPC, 1);
    }

    static MemorySegment modifyQp(int opcode, int qpn) {
        MemorySegment in = input(opcode, 0, Qp.MODIFY_IN_LEN);
        Pages.INDEX24.set(in, 0, qpn);
        return in;
    }

    /**
     * {@code CREATE_MKEY} over {@code len} bytes of umem {@code umem} from {@code umemOffset}, seen
     * at virtual address {@code start}, local and remote read and write, on {@code pd}.
     */
    public static MemorySegment createUmemMkey(int pd, long start, long len, int umem, long umemOffset) {
        return createUmemMkey(pd, start, len, umem, umemOffset, false);
    }

    /** As {@link #createUmemMkey(int, long, long, int, long)}, remote atomics allowed too when {@code atomic} ({@code MKC_A}). */
    public static MemorySegment createUmemMkey(int pd, long start, long len, int umem, long umemOffset, boolean atomic) {
        return createUmemMkey(pd, start, len, umem, umemOffset, atomic, true);
    }

    /** As {@link #createUmemMkey(int, long, long, int, long, boolean)}; without {@code writable} local and remote write are off ({@code MKC_LW}, {@code MKC_RW}). */
    public static MemorySegment createUmemMkey(int pd, long start, long len, int umem, long umemOffset, boolean atomic, boolean writable) {
        MemorySegment in = input(Mlx5Cmd.CREATE_MKEY, 0, (int) Mkey.CREATE_IN_MTT);
        Mkey.MKC_A.set(in, Mkey.CREATE_IN_MKC, atomic ? 1 : 0);
        long m = Mkey.CREATE_IN_MKC;
        Mkey.MKC_ACCESS_MODE_1_0.set(in, m, Mkey.ACCESS_MODE_MTT);
        Mkey.MKC_LR.set(in, m, 1);
        Mkey.MKC_LW.set(in, m, writable ? 1 : 0);
        Mkey.MKC_RR.set(in, m, 1);
        Mkey.MKC_RW.set(in, m, writable ? 1 : 0);
        Mkey.MKC_PD.set(in, m, pd);
        Mkey.MKC_LOG_PAGE_SIZE.set(in, m, 12);
        in.set(BE64, m + Mkey.MKC_START_ADDR, start);
        in.set(BE64, m + Mkey.MKC_LEN, len);
        Devx.MKEY_UMEM_VALID.set(in, 0, 1);
        in.set(BE32, Devx.MKEY_UMEM_ID, umem);
        in.set(BE64, Devx.MKEY_UMEM_OFFSET, umemOffset);
        return in;
    }
}
