package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.Map;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.QpContext;
import org.peerdirect.hca.cx3.ifc.SrqContext;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.hca.engine.QpCommand;

/**
 * The QP state-transition commands ({@code qp.c} from the device's side): {@code RST2INIT_QP},
 * {@code INIT2INIT_QP}, {@code INIT2RTR_QP}, {@code RTR2RTS_QP}, {@code RTS2RTS_QP},
 * {@code SQERR2RTS_QP}, {@code RTS2SQD_QP}, {@code SQD2SQD_QP}, {@code SQD2RTS_QP},
 * {@code 2ERR_QP}, {@code 2RST_QP} with the QP context in the input mailbox (none for 2ERR and
 * 2RST), and {@code QUERY_QP}; the SRQs' {@code ARM_SRQ} and {@code QUERY_SRQ}. The engine's QP, by number, executes the transition; a command in
 * the wrong state is {@code BAD_QP_STATE}, a bad field {@code BAD_PARAM}.
 *
 * <p>Lock rules: the firmware thread alone (commands, under the device's firmware lock).
 */
final class Qps {

    private final Firmware fw;

    Qps(Firmware fw) {
        this.fw = fw;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        for (QpCommand q : QpCommand.values()) {
            table.put(q.opcode, c -> modify(q, c));
        }
        table.put(Mlx4Cmd.QUERY_QP, this::query);
        table.put(Mlx4Cmd.ARM_SRQ, this::armSrq);
        table.put(Mlx4Cmd.QUERY_SRQ, this::querySrq);
    }

    private HwSrq srq(Firmware.Cmd c) throws Refused {
        HcaDevice e = fw.engine();
        HwSrq s = (c.inMod() & 0xff00_0000) == 0 && e != null ? e.srqByNumber(c.inMod()) : null;
        if (s == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RESOURCE, String.format("SRQ 0x%x is not in hardware ownership", c.inMod()));
        }
        return s;
    }

    /** {@code ARM_SRQ}: the limit event fires when the SRQ's WQEs drop below the watermark (16 bits, at most the SRQ's size). */
    private long armSrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwSrq s = srq(c);
        long lwm = c.inParam();
        if (lwm < 0 || lwm > s.queue().size()) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "limit watermark " + lwm + " above the SRQ's " + s.queue().size() + " WQEs");
        }
        try {
            s.arm((int) lwm);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        return 0;
    }

    private long querySrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwSrq s = srq(c);
        MemorySegment o = MemorySegment.ofArray(new byte[SrqContext.SIZE]);
        o.set(BE32, SrqContext.STATE_LOGSIZE_SRQN, Integer.numberOfTrailingZeros(s.queue().size()) << 24 | s.srqn);
        o.set(BE16, SrqContext.LIMIT_WATERMARK, (short) s.limit());
        fw.outbox(c, o);
        return 0;
    }

    private HwQp qp(Firmware.Cmd c) throws Refused {
        int qpn = c.inMod() & 0xff_ffff;
        HcaDevice e = fw.engine();
        HwQp q = (c.inMod() & 0xff00_0000) == 0 && e != null ? e.qpByNumber(qpn) : null;
        if (q == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RESOURCE, String.format("QP 0x%x is not allocated", c.inMod()));
        }
        return q;
    }

    private long modify(QpCommand cmd, Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwQp q = qp(c);
        org.peerdirect.hca.engine.QpContext ctx = q.context();
        if (cmd != QpCommand.TO_ERR && cmd != QpCommand.TO_RST) {
            MemorySegment m = fw.inbox(c, QpContext.MAILBOX_SIZE);
            read(m.asSlice(QpContext.CONTEXT), ctx);
        }
        try {
            q.modify(cmd, ctx);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        return 0;
    }

    /** The context's fields into the engine's QP context. */
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

    /** {@code QUERY_QP}: the state and the context as the device keeps it. */
    private long query(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwQp q = qp(c);
        org.peerdirect.hca.engine.QpContext ctx = q.context();
        MemorySegment o = MemorySegment.ofArray(new byte[QpContext.MAILBOX_SIZE]);
        MemorySegment x = o.asSlice(QpContext.CONTEXT);
        int st = switch (q.state()) {
            case RST -> QpContext.STATE_RST;
            case INIT -> QpContext.STATE_INIT;
            case RTR -> QpContext.STATE_RTR;
            case RTS -> QpContext.STATE_RTS;
            case SQER -> QpContext.STATE_SQER;
            case SQD -> QpContext.STATE_SQD;
            case ERR -> QpContext.STATE_ERR;
        };
        long p = QpContext.PRI_PATH;
        x.set(BE32, QpContext.FLAGS, st << 28 | (q.serviceType() & 0xff) << 16);
        x.set(BE32, QpContext.PD, q.pdn());
        x.set(U8, QpContext.MTU_MSGMAX, (byte) (ctx.mtu << 5 | 31));
        x.set(BE32, QpContext.LOCAL_QPN, q.qpn());
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
}
