package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.SrqContext;
import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.hca.engine.RecvFetcher;
import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * Shared receive queues ({@code srq.c} from the device's side): {@code SW2HW_SRQ} with the SRQ
 * context (size, WQE stride, PD, the buffer's MTT, the doorbell record) at the SRQN the driver
 * chose, {@code HW2SW_SRQ} (refused while a QP uses it), {@code ARM_SRQ} and {@code QUERY_SRQ}.
 * The WQEs are bytes in the buffer the MTT names: the device walks libmlx4's free list
 * ({@link MemSrq}).
 *
 * <p>Lock rules: {@link #srqs} is written by the firmware thread and read by the data path (CQE
 * writers, QP creation); an SRQ's fetch runs under the engine queue's consumer lock.
 */
final class Srqs {

    private final Firmware fw;
    /** srqn → the SRQ in host memory. */
    private final AtomicReferenceArray<MemSrq> srqs = new AtomicReferenceArray<>(HcaDevice.MAX_SRQ);

    Srqs(Firmware fw) {
        this.fw = fw;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        table.put(Mlx4Cmd.SW2HW_SRQ, this::sw2hwSrq);
        table.put(Mlx4Cmd.HW2SW_SRQ, this::hw2swSrq);
        table.put(Mlx4Cmd.ARM_SRQ, this::armSrq);
        table.put(Mlx4Cmd.QUERY_SRQ, this::querySrq);
    }

    /** The SRQ numbered {@code srqn}, or null (any thread). */
    MemSrq srq(int srqn) {
        return srqn >= 0 && srqn < srqs.length() ? srqs.get(srqn) : null;
    }

    /** CLOSE_HCA, reset: forgotten (the engine's SRQs went with the engine's reset). */
    void dropAll() {
        for (int i = 0; i < srqs.length(); i++) {
            srqs.set(i, null);
        }
    }

    private static int number(Firmware.Cmd c) throws Refused {
        if (c.inMod() < 0 || c.inMod() >= HcaDevice.MAX_SRQ) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "SRQ " + c.inMod() + " (0.." + (HcaDevice.MAX_SRQ - 1) + ")");
        }
        return c.inMod();
    }

    private MemSrq live(Firmware.Cmd c) throws Refused {
        MemSrq s = srq(number(c));
        if (s == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "SRQ " + c.inMod() + " is not in hardware ownership");
        }
        return s;
    }

    /**
     * {@code SW2HW_SRQ}: 2^log WQEs of 16 << logstride bytes (a next segment, then data segments)
     * in 4 KiB pages the MTT names, the doorbell record at its bus address, WQEs taken down the
     * free list the library built from index 0.
     */
    private long sw2hwSrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int srqn = number(c);
        MemorySegment ctx = fw.inbox(c, SrqContext.SIZE);
        int word = ctx.get(BE32, SrqContext.STATE_LOGSIZE_SRQN);
        int log = word >>> 24 & 0xf;
        int stride = 16 << (ctx.get(U8, SrqContext.LOGSTRIDE) & 0x7);
        if ((word & 0xff_ffff) != srqn) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "the SRQ context names SRQ " + (word & 0xff_ffff) + ", the modifier " + srqn);
        }
        if (log > Firmware.LOG_MAX_WQES || stride < Wqe.SRQ_NEXT_SIZE + Wqe.DATA_SIZE || stride > Firmware.MAX_DESC_SZ_RQ) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SIZE, "SRQ of 2^" + log + " WQEs of " + stride + " bytes (at most 2^" + Firmware.LOG_MAX_WQES
                    + " of " + Firmware.MAX_DESC_SZ_RQ + ", at least a next and a data segment)");
        }
        if (ctx.get(U8, SrqContext.LOG_PAGE_SIZE) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "SRQ pages must be 4 KiB (log_page_size 0)");
        }
        int pd = ctx.get(BE32, SrqContext.PD) & 0xff_ffff;
        if (pd < Firmware.RSVD_PDS) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "SRQ in PD " + pd + " (PDs below " + Firmware.RSVD_PDS + " are reserved)");
        }
        long db = ctx.get(BE64, SrqContext.DB_REC_ADDR);
        if ((db & 3) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("SRQ doorbell record at 0x%x is not 4-byte aligned", db));
        }
        int wqes = 1 << log;
        long mtt = (long) (ctx.get(U8, SrqContext.MTT_BASE_ADDR_H) & 0xff) << 32 | ctx.get(BE32, SrqContext.MTT_BASE_ADDR_L) & 0xffff_ffffL;
        long[] pages = fw.icm.readMtt(mtt, (int) (((long) wqes * stride + 4095) / 4096));
        HwSrq hw;
        try {
            hw = fw.engine().sw2hwSrqAt(srqn, pd, Math.min(wqes, HcaDevice.MAX_QP_WR), Math.min(stride / 16 - 1, HcaDevice.MAX_SGE));
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        MemSrq s = new MemSrq(hw, pages, db, wqes, stride);
        hw.queue().fetcher(s);
        srqs.set(srqn, s);
        return 0;
    }

    private long hw2swSrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        MemSrq s = live(c);
        try {
            fw.engine().hw2swSrq(s.hw);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        srqs.set(s.hw.srqn, null);
        return 0;
    }

    /** {@code ARM_SRQ}: the limit event fires when the SRQ's WQEs drop below the watermark (16 bits, at most the SRQ's size). */
    private long armSrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        MemSrq s = live(c);
        long lwm = c.inParam();
        if (lwm < 0 || lwm > s.hw.queue().size()) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "limit watermark " + lwm + " above the SRQ's " + s.hw.queue().size() + " WQEs");
        }
        try {
            s.hw.arm((int) lwm);
        } catch (HwCommandException e) {
            throw Tpt.refused(e);
        }
        return 0;
    }

    private long querySrq(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        MemSrq s = live(c);
        MemorySegment o = MemorySegment.ofArray(new byte[SrqContext.SIZE]);
        o.set(BE32, SrqContext.STATE_LOGSIZE_SRQN, Integer.numberOfTrailingZeros(s.wqes) << 24 | s.hw.srqn);
        o.set(BE16, SrqContext.LIMIT_WATERMARK, (short) s.hw.limit());
        o.set(BE16, SrqContext.WQE_CNT, (short) s.wqes);
        fw.outbox(c, o);
        return 0;
    }

    /**
     * An SRQ in host memory: the device takes WQEs down libmlx4's free list from index 0 (each
     * WQE's next segment names the one after it), as many as the doorbell record's 16-bit counter
     * says were posted, and remembers which buffer index each engine slot came from: a receive
     * completion reports that index, which the library puts back on its list.
     */
    final class MemSrq implements RecvFetcher {
        final HwSrq hw;
        private final long[] pages;
        private final long db;
        final int wqes;
        private final int stride;
        /** Engine slot → buffer index of the WQE in it (written under the queue's consumer lock, before the slot is handed out). */
        private final int[] indexOfSlot;
        /** Under the queue's consumer lock: WQEs taken (16 bits, as the record counts) and the index of the next one. */
        private int taken;
        private int next;
        private final MemorySegment wqe;
        private final MemorySegment word = MemorySegment.ofArray(new byte[4]);

        MemSrq(HwSrq hw, long[] pages, long db, int wqes, int stride) {
            this.hw = hw;
            this.pages = pages;
            this.db = db;
            this.wqes = wqes;
            this.stride = stride;
            this.indexOfSlot = new int[hw.queue().size()];
            this.wqe = MemorySegment.ofArray(new byte[stride]);
        }

        /** The buffer index of the WQE engine slot {@code slot} came from (a receive CQE's {@code wqe_index}). */
        int wqeIndex(long slot) {
            return indexOfSlot[(int) slot & indexOfSlot.length - 1];
        }

        /** The record's counter minus the WQEs taken, or -1 when the record is unreadable. */
        private int posted() {
            try {
                fw.port.read(db + Wqe.DB_RECORD, word, 0, 4);
            } catch (IommuFault f) {
                fw.qps.dmaFaults.incrementAndGet();
                return -1;
            }
            return word.get(BE32, 0) - taken & 0xffff;
        }

        @Override
        public long notFetched(RecvQueue q) {
            return Math.max(0, posted());
        }

        @Override
        public long fetch(RecvQueue q, long head, long tail) {
            int n = posted();
            long t = tail;
            for (; n > 0 && t - head < q.size(); n--) {
                long off = (long) (next & wqes - 1) * stride;
                try {
                    fw.port.read(pages[(int) (off >>> 12)] + (off & 0xfff), wqe, 0, stride);
                } catch (IommuFault f) {
                    fw.qps.dmaFaults.incrementAndGet();
                    break;
                }
                Qps.scatter(wqe, Wqe.SRQ_NEXT_SIZE, stride, q.slot(t));
                indexOfSlot[(int) t & indexOfSlot.length - 1] = next & wqes - 1;
                next = wqe.get(BE16, Wqe.SRQ_NEXT_WQE_INDEX) & 0xffff;
                taken = taken + 1 & 0xffff;
                t++;
                fw.qps.recvWqes.increment();
            }
            return t;
        }
    }
}
