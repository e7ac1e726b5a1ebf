package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.Map;

import org.peerdirect.hca.cx3.ifc.CqContext;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.SrqContext;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.hca.engine.HwSrq;

/**
 * CQs and SRQs handed to the device ({@code cq.c}, {@code srq.c} from the device's side):
 * {@code SW2HW_CQ} with the CQ context (size, completion EQ) at the CQN the driver chose,
 * {@code HW2SW_CQ} (refused while a QP uses it), {@code SW2HW_SRQ} (size, WQE stride, PD) and
 * {@code HW2SW_SRQ}. The queues themselves are still the engine's slot rings: their CQEs and WQEs
 * are not bytes in memory yet, so the MTT and doorbell-record fields are not read.
 *
 * <p>Lock rules: the firmware thread alone (commands, under the device's firmware lock).
 */
final class Cqs {

    private final Firmware fw;

    Cqs(Firmware fw) {
        this.fw = fw;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        table.put(Mlx4Cmd.SW2HW_CQ, this::sw2hwCq);
        table.put(Mlx4Cmd.HW2SW_CQ, this::hw2swCq);
        table.put(Mlx4Cmd.SW2HW_SRQ, this::sw2hwSrq);
        table.put(Mlx4Cmd.HW2SW_SRQ, this::hw2swSrq);
    }

    private static int number(Firmware.Cmd c, int max, String what) throws Refused {
        if (c.inMod() < 0 || c.inMod() >= max) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, what + " " + c.inMod() + " (0.." + (max - 1) + ")");
        }
        return c.inMod();
    }

    private long sw2hwCq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int cqn = number(c, HcaDevice.MAX_CQ, "CQ");
        MemorySegment ctx = fw.inbox(c, CqContext.SIZE);
        int log = ctx.get(BE32, CqContext.LOGSIZE_USRPAGE) >>> 24 & 0x1f;
        int eqn = ctx.get(U8, CqContext.COMP_EQN) & 0xff;
        if (log > 22) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SIZE, "CQ of 2^" + log + " CQEs (at most 2^22)");
        }
        if (!fw.eqs.eqLive(eqn)) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "completion EQ " + eqn + " is not in hardware ownership");
        }
        try {
            fw.engine().sw2hwCqAt(cqn, Math.min(1 << log, HcaDevice.MAX_CQE));
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        fw.eqs.cqEq(cqn, eqn);
        return 0;
    }

    private long hw2swCq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int cqn = number(c, HcaDevice.MAX_CQ, "CQ");
        HwCq cq = fw.engine().cqByNumber(cqn);
        if (cq == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "CQ " + cqn + " is not in hardware ownership");
        }
        try {
            fw.engine().hw2swCq(cq);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        fw.eqs.cqEq(cqn, -1);
        return 0;
    }

    /** {@code SW2HW_SRQ}: 2^log WQEs (the engine's limit kept), scatter entries from the WQE stride (a next segment, then 16-byte data segments). */
    private long sw2hwSrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int srqn = number(c, HcaDevice.MAX_SRQ, "SRQ");
        MemorySegment ctx = fw.inbox(c, SrqContext.SIZE);
        int word = ctx.get(BE32, SrqContext.STATE_LOGSIZE_SRQN);
        int log = word >>> 24 & 0xf;
        int stride = 16 << (ctx.get(U8, SrqContext.LOGSTRIDE) & 0x7);
        if ((word & 0xff_ffff) != srqn) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "the SRQ context names SRQ " + (word & 0xff_ffff) + ", the modifier " + srqn);
        }
        try {
            fw.engine().sw2hwSrqAt(srqn, ctx.get(BE32, SrqContext.PD) & 0xff_ffff, Math.min(1 << log, HcaDevice.MAX_QP_WR),
                    Math.min(stride / 16 - 1, HcaDevice.MAX_SGE));
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        return 0;
    }

    private long hw2swSrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int srqn = number(c, HcaDevice.MAX_SRQ, "SRQ");
        HwSrq s = fw.engine().srqByNumber(srqn);
        if (s == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "SRQ " + srqn + " is not in hardware ownership");
        }
        try {
            fw.engine().hw2swSrq(s);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        return 0;
    }
}
