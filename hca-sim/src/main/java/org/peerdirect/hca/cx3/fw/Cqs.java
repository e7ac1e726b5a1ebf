package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

import org.peerdirect.hca.cx3.ifc.CqContext;
import org.peerdirect.hca.cx3.ifc.Cqe;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwCq;

/**
 * CQs handed to the device ({@code cq.c} from the device's side): {@code SW2HW_CQ} with the CQ
 * context (size, completion EQ) at the CQN the driver chose, {@code HW2SW_CQ} (refused while a QP
 * uses it), {@code QUERY_CQ}. A CQ's CQEs are bytes in the driver's ring ({@link CqRing}).
 *
 * <p>Lock rules: the firmware thread alone (commands, under the device's firmware lock).
 */
final class Cqs {

    private final Firmware fw;
    /** cqn → its ring (written by the firmware thread). */
    private final AtomicReferenceArray<CqRing> rings = new AtomicReferenceArray<>(HcaDevice.MAX_CQ);
    /** CQEs written into the drivers' rings, and the ring or record accesses the IOMMU refused. */
    final LongAdder cqesWritten = new LongAdder();
    final AtomicLong cqDmaFaults = new AtomicLong();

    Cqs(Firmware fw) {
        this.fw = fw;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        table.put(Mlx4Cmd.SW2HW_CQ, this::sw2hwCq);
        table.put(Mlx4Cmd.HW2SW_CQ, this::hw2swCq);
        table.put(Mlx4Cmd.QUERY_CQ, this::queryCq);
    }

    /** CLOSE_HCA, reset: the rings are forgotten (the engine's CQs went with the engine's reset). */
    void dropAll() {
        for (int i = 0; i < rings.length(); i++) {
            rings.set(i, null);
        }
    }

    /** CQs the device writes now. */
    int count() {
        int n = 0;
        for (int i = 0; i < rings.length(); i++) {
            n += rings.get(i) == null ? 0 : 1;
        }
        return n;
    }

    private static int number(Firmware.Cmd c, int max, String what) throws Refused {
        if (c.inMod() < 0 || c.inMod() >= max) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, what + " " + c.inMod() + " (0.." + (max - 1) + ")");
        }
        return c.inMod();
    }

    /**
     * {@code SW2HW_CQ}: 2^log CQEs in 4 KiB pages the MTT names from the context's MTT address, the
     * doorbell record at its bus address, completion events to the EQ it names. The ring's CQEs
     * are written by {@link CqRing}.
     */
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
        if (ctx.get(U8, CqContext.LOG_PAGE_SIZE) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "CQ pages must be 4 KiB (log_page_size 0)");
        }
        long dbRec = ctx.get(BE64, CqContext.DB_REC_ADDR);
        if ((dbRec & (Cqe.DB_SIZE - 1)) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("CQ doorbell record at 0x%x is not 8-byte aligned", dbRec));
        }
        long mtt = (long) (ctx.get(U8, CqContext.MTT_BASE_ADDR_H) & 0xff) << 32 | ctx.get(BE32, CqContext.MTT_BASE_ADDR_L) & 0xffff_ffffL;
        int npages = (int) Math.max(1, ((long) Cqe.SIZE << log) / 4096);
        CqRing ring = new CqRing(log, fw.icm.readMtt(mtt, npages), dbRec, fw.port, fw.qps::cqeWqeIndex, cqesWritten, cqDmaFaults);
        try {
            ring.hw = fw.engine().sw2hwCqAt(cqn, 1 << log, ring);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        rings.set(cqn, ring);
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
        rings.set(cqn, null);
        fw.eqs.cqEq(cqn, -1);
        return 0;
    }

    /**
     * {@code QUERY_CQ}: the context with the CQ's status (overflow once a CQE found no free entry),
     * its size and its producer and consumer indexes (24 bits).
     */
    private long queryCq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int cqn = number(c, HcaDevice.MAX_CQ, "CQ");
        HwCq cq = fw.engine().cqByNumber(cqn);
        CqRing ring = rings.get(cqn);
        if (cq == null || ring == null || ring.hw != cq) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "CQ " + cqn + " is not in hardware ownership");
        }
        MemorySegment o = MemorySegment.ofArray(new byte[CqContext.SIZE]);
        int status = cq.inError() ? CqContext.STATUS_OVERFLOW : CqContext.STATUS_OK;
        o.set(BE32, CqContext.FLAGS, status << CqContext.STATUS_SHIFT);
        o.set(BE32, CqContext.LOGSIZE_USRPAGE, ring.logSize << 24);
        o.set(BE32, CqContext.PRODUCER_INDEX, (int) cq.producerIndex() & 0xff_ffff);
        fw.outbox(c, o);
        return 0;
    }
}
