package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.hca.cx3.ifc.EqContext;
import org.peerdirect.hca.cx3.ifc.Eqe;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.engine.AsyncEventHandler;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCq;

/**
 * The event queues ({@code eq.c} from the device's side): {@code SW2HW_EQ} with the EQ context
 * in a mailbox and its ring's pages in the MTT, {@code MAP_EQ} routing event types to an EQ,
 * {@code HW2SW_EQ}, {@code QUERY_EQ}; the EQEs the engine's events become (completion of a CQ to
 * the CQ's EQ, CQ errors, the QPs' and SRQs' affiliated events, port changes) and the
 * command-completion events of the HCR in event mode; the EQ doorbells of the UAR pages.
 *
 * <p>Lock rules: the EQ table is written by the firmware thread (commands, under the device's
 * firmware lock) and read by every thread that posts or rings; each {@link HwEq} guards itself.
 */
final class Eqs {

    private final Firmware fw;
    private final AtomicReferenceArray<HwEq> eqs = new AtomicReferenceArray<>(1 << Firmware.LOG_MAX_EQ);
    /** cqn → the EQ its completion events go to (+1; 0: none named, the default completion EQ). */
    private final AtomicIntegerArray cqEq = new AtomicIntegerArray(HcaDevice.MAX_CQ);
    /** Events no EQ took (none mapped, ring full, dead). */
    final AtomicLong lost = new AtomicLong();
    final AtomicLong strayDoorbells = new AtomicLong();

    Eqs(Firmware fw) {
        this.fw = fw;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        table.put(Mlx4Cmd.SW2HW_EQ, this::sw2hwEq);
        table.put(Mlx4Cmd.HW2SW_EQ, this::hw2swEq);
        table.put(Mlx4Cmd.MAP_EQ, this::mapEq);
        table.put(Mlx4Cmd.QUERY_EQ, this::queryEq);
    }

    private int eqn(int inMod) throws Refused {
        int n = inMod & 0x3ff;
        int reserved = Firmware.RSVD_UARS * 4;
        if (n < reserved || n >= eqs.length() || (inMod & 0x7fff_fc00) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "EQ " + inMod + " (EQs " + reserved + ".." + (eqs.length() - 1) + ")");
        }
        return n;
    }

    private HwEq live(int inMod) throws Refused {
        int n = eqn(inMod);
        HwEq eq = eqs.get(n);
        if (eq == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "EQ " + n + " is not in hardware ownership (SW2HW_EQ)");
        }
        return eq;
    }

    /** {@code SW2HW_EQ}: size, vector, page size 4 KiB, the MTT entries of its pages present. */
    private long sw2hwEq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int n = eqn(c.inMod());
        if (eqs.get(n) != null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "EQ " + n + " is already in hardware ownership");
        }
        MemorySegment ctx = fw.inbox(c, EqContext.SIZE);
        int log = ctx.get(U8, EqContext.LOG_EQ_SIZE) & 0x1f;
        int intr = ctx.get(U8, EqContext.INTR) & 0xff;
        if (log < 1 || log > EqContext.MAX_LOG_EQ_SIZE) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SIZE, "EQ of 2^" + log + " entries (2^1..2^" + EqContext.MAX_LOG_EQ_SIZE + ")");
        }
        if (ctx.get(U8, EqContext.LOG_PAGE_SIZE) != 0 || ctx.get(BE16, EqContext.PAGE_OFFSET) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "EQ pages must be 4 KiB at offset 0");
        }
        if (intr >= fw.fn.msixVectors()) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "EQ vector " + intr + " (the function has " + fw.fn.msixVectors() + ")");
        }
        long mtt = (long) (ctx.get(U8, EqContext.MTT_BASE_ADDR_H) & 0xff) << 32 | ctx.get(BE32, EqContext.MTT_BASE_ADDR_L) & 0xffff_ffffL;
        int npages = Math.max(1, (Eqe.SIZE << log) / 4096);
        long[] pages = fw.icm.readMtt(mtt, npages);
        eqs.set(n, new HwEq(n, log, pages, intr));
        return 0;
    }

    /** {@code HW2SW_EQ}: the EQ stops writing; its ring is the driver's again. */
    private long hw2swEq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwEq eq = live(c.inMod());
        eq.kill();
        eqs.set(eq.eqn, null);
        return 0;
    }

    /** {@code MAP_EQ}: routes (or, bit 31 of the modifier, unroutes) the event types of the mask to the EQ. */
    private long mapEq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwEq eq = live(c.inMod() & 0x7fff_ffff);
        long mask = c.inParam();
        if ((mask & 1L << Mlx4Cmd.EVENT_COMP) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "completion events go to the EQ a CQ names, they are not mapped");
        }
        eq.map(mask, c.inMod() < 0);
        return 0;
    }

    private long queryEq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        HwEq eq = live(c.inMod());
        MemorySegment o = MemorySegment.ofArray(new byte[EqContext.SIZE]);
        o.set(BE32, EqContext.FLAGS, EqContext.STATUS_OK | (eq.armed() ? EqContext.STATE_ARMED : EqContext.STATE_FIRED));
        o.set(U8, EqContext.LOG_EQ_SIZE, (byte) eq.logSize);
        o.set(U8, EqContext.INTR, (byte) eq.intr);
        o.set(BE32, EqContext.CONSUMER_INDEX, eq.consumer() & 0xff_ffff);
        o.set(BE32, EqContext.PRODUCER_INDEX, eq.producer() & 0xff_ffff);
        fw.outbox(c, o);
        return 0;
    }

    /** The CQ's completion events go to EQ {@code eqn} (SW2HW_CQ); -1 forgets it. */
    void cqEq(int cqn, int eqn) {
        cqEq.set(cqn, eqn + 1);
    }

    boolean eqLive(int eqn) {
        return eqn >= 0 && eqn < eqs.length() && eqs.get(eqn) != null;
    }

    /** Every EQ stops (CLOSE_HCA, reset): nothing more is written to the driver's rings. */
    void killAll() {
        for (int i = 0; i < eqs.length(); i++) {
            HwEq eq = eqs.getAndSet(i, null);
            if (eq != null) {
                eq.kill();
            }
        }
        for (int i = 0; i < cqEq.length(); i++) {
            cqEq.set(i, 0);
        }
    }

    int count() {
        int n = 0;
        for (int i = 0; i < eqs.length(); i++) {
            n += eqs.get(i) == null ? 0 : 1;
        }
        return n;
    }

    /** Posts one event to {@code eq}, raising its vector when it was armed. */
    private void post(HwEq eq, int type, int subType, MemorySegment data) {
        if (eq == null) {
            lost.incrementAndGet();
            return;
        }
        if (eq.post(fw.port, type, subType, data)) {
            fw.fn.raiseMsix(eq.intr);
        }
    }

    /** The EQ {@code MAP_EQ} routed {@code type} to (the lowest such), or null. */
    private HwEq mapped(int type) {
        for (int i = 0; i < eqs.length(); i++) {
            HwEq eq = eqs.get(i);
            if (eq != null && eq.wants(type)) {
                return eq;
            }
        }
        return null;
    }

    /** An event of {@code type} to the EQ mapped for it. */
    void postEvent(int type, int subType, MemorySegment data) {
        post(mapped(type), type, subType, data);
    }

    /** The command-completion event of an HCR command posted in event mode. */
    void postCmd(int token, int status, long out) {
        MemorySegment d = MemorySegment.ofArray(new byte[Eqe.DATA_SIZE]);
        d.set(BE16, Eqe.CMD_TOKEN - Eqe.DATA, (short) token);
        d.set(U8, Eqe.CMD_STATUS - Eqe.DATA, (byte) status);
        d.set(BE64, Eqe.CMD_OUT_PARAM - Eqe.DATA, out);
        postEvent(Mlx4Cmd.EVENT_CMD, 0, d);
    }

    /** A completion event of {@code cqn}: to its EQ, or (a CQ without a context) the lowest EQ no event type is mapped to. */
    private void completion(int cqn, boolean error) {
        MemorySegment d = MemorySegment.ofArray(new byte[Eqe.DATA_SIZE]);
        d.set(BE32, Eqe.COMP_CQN - Eqe.DATA, cqn & 0xff_ffff);
        if (error) {
            d.set(U8, Eqe.CQ_ERR_SYNDROME - Eqe.DATA, (byte) Eqe.CQ_ERR_OVERRUN);
            postEvent(Mlx4Cmd.EVENT_CQ_ERROR, 0, d);
            return;
        }
        int named = cqEq.get(cqn) - 1;
        HwEq eq = named >= 0 ? eqs.get(named) : null;
        if (named < 0) {
            for (int i = 0; i < eqs.length() && eq == null; i++) {
                HwEq e = eqs.get(i);
                eq = e != null && e.eventMask() == 0 ? e : null;
            }
        }
        post(eq, Mlx4Cmd.EVENT_COMP, 0, d);
    }

    /** INIT_HCA: the engine's events become EQEs. */
    void attach(HcaDevice engine) {
        engine.setEventHandler((HwCq cq, boolean error) -> completion(cq.cqn, error));
        engine.setAsyncEventHandler(new AsyncEventHandler() {
            @Override
            public void event(int type, int number) {
                // the engine's type codes are mlx4's (enum mlx4_event); QP or SRQ number in the first data word
                MemorySegment d = MemorySegment.ofArray(new byte[Eqe.DATA_SIZE]);
                d.set(BE32, Eqe.QP_QPN - Eqe.DATA, number & 0xff_ffff);
                postEvent(type, 0, d);
            }

            @Override
            public void portEvent(int port, int subtype) {
                MemorySegment d = MemorySegment.ofArray(new byte[Eqe.DATA_SIZE]);
                d.set(BE32, Eqe.PORT_CHANGE_PORT - Eqe.DATA, port << 28);
                postEvent(Mlx4Cmd.EVENT_PORT_CHANGE, subtype == AsyncEventHandler.PORT_ACTIVE ? Mlx4Cmd.PORT_CHANGE_SUBTYPE_ACTIVE
                        : Mlx4Cmd.PORT_CHANGE_SUBTYPE_DOWN, d);
            }
        });
    }

    /** An EQ doorbell of UAR page {@code page}, slot {@code slot} (0..3): be32 {@code ci | req_not << 31}. */
    void doorbell(int page, int slot, int value) {
        int n = page * 4 + slot;
        HwEq eq = n < eqs.length() ? eqs.get(n) : null;
        if (eq == null) {
            strayDoorbells.incrementAndGet();
            return;
        }
        if (eq.doorbell(value & 0xff_ffff, value < 0)) {
            fw.fn.raiseMsix(eq.intr);
        }
    }

    String describe() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < eqs.length(); i++) {
            HwEq eq = eqs.get(i);
            if (eq != null) {
                b.append(String.format(" EQ %d (2^%d, vector %d, mask 0x%x, pi %d ci %d%s)", i, eq.logSize, eq.intr, eq.eventMask(), eq.producer(),
                        eq.consumer(), eq.overruns() > 0 ? ", overruns " + eq.overruns() : ""));
            }
        }
        return b.toString();
    }
}
