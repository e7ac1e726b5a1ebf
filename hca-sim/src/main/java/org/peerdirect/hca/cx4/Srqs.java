package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.hca.engine.RecvFetcher;
import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * Shared receive queues, basic and XRC ({@code CREATE_SRQ}, {@code CREATE_XRC_SRQ}, their
 * {@code DESTROY}/{@code QUERY} commands, {@code ARM_RQ}; the driver side is {@code mlx5_ib}'s
 * {@code srq.c} and {@code srq_cmd.c}): the context checked and kept in a firmware page (128 B);
 * the engine's SRQ fetches WQEs from host memory by the linked list ({@link MemSrq}).
 *
 * <p>Lock rules: {@link #srqs} is an atomic array written by the firmware thread and read by the
 * data path; an SRQ's fetch runs under the engine queue's consumer lock.
 */
final class Srqs {

    static final int SRQ_CONTEXT_BYTES = 128;

    private final DataPath dp;
    private final Allocations allocations;
    private final Caps caps;
    private final FirmwarePages pages;
    private final Cqs cqs;
    /** srqn → the SRQ in host memory (set by the firmware thread, read by the data path). */
    private final AtomicReferenceArray<MemSrq> srqs = new AtomicReferenceArray<>(HcaDevice.MAX_SRQ);
    /** WQEs fetched by destroyed SRQs. */
    private final AtomicLong retiredWqes = new AtomicLong();

    Srqs(DataPath dp, Allocations allocations, Caps caps, FirmwarePages pages, Cqs cqs) {
        this.dp = dp;
        this.allocations = allocations;
        this.caps = caps;
        this.pages = pages;
        this.cqs = cqs;
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.CREATE_SRQ, CommandTable.withList(Srq.CREATE_SRQ_IN_PAS, Srqs::srqPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createSrq(in, out, caps.cur(HcaCap.LOG_MAX_SRQ_SZ)));
        t.add(Mlx5Cmd.DESTROY_SRQ, (opMod, in, out) -> destroySrq(in, false));
        t.add(Mlx5Cmd.QUERY_SRQ, CommandTable.MIN_INPUT, Srq.QUERY_SRQ_OUT_LEN, (opMod, in, out) -> querySrq(in, out, false));
        t.add(Mlx5Cmd.ARM_RQ, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (opMod, in, out) -> armRq(in, false));
        t.add(Mlx5Cmd.CREATE_XRC_SRQ, CommandTable.withList(Srq.CREATE_SRQ_IN_PAS, Srqs::srqPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createXrcSrq(in, out, caps.cur(HcaCap.LOG_MAX_SRQ_SZ)));
        t.add(Mlx5Cmd.DESTROY_XRC_SRQ, (opMod, in, out) -> destroySrq(in, true));
        t.add(Mlx5Cmd.QUERY_XRC_SRQ, CommandTable.MIN_INPUT, Srq.QUERY_SRQ_OUT_LEN, (opMod, in, out) -> querySrq(in, out, true));
        // takes op_mod 1 (MLX5_ARM_XRC_SRQ_IN_OP_MOD_XRC_SRQ), as ARM_RQ does; armRq checks its value
        t.add(Mlx5Cmd.ARM_XRC_SRQ, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (opMod, in, out) -> armRq(in, true));
    }

    /** The SRQ with this number, or null (any thread). */
    MemSrq srq(int srqn) {
        return srqn >= 0 && srqn < srqs.length() ? srqs.get(srqn) : null;
    }

    int count() {
        return (int) DataPath.sum(srqs, s -> 1);
    }

    long wqesFetched() {
        return retiredWqes.get() + DataPath.sum(srqs, s -> s.wqesFetched.get());
    }

    private void retire(MemSrq s) {
        retiredWqes.addAndGet(s.wqesFetched.get());
    }

    /** Force close: every SRQ dropped (the engine was reset first). */
    void dropAll() {
        for (int i = 0; i < srqs.length(); i++) {
            MemSrq s = srqs.get(i);
            if (s != null) {
                retire(s);
                srqs.set(i, null);
            }
        }
    }

    /** The pages an SRQ's WQEs span (the length check of CREATE_SRQ's page list). */
    static int srqPages(MemorySegment in) {
        long c = Srq.CREATE_SRQ_IN_SRQC;
        long bytes = (16L << Srq.SRQC_LOG_RQ_STRIDE.get(in, c)) << Math.min(15, Srq.SRQC_LOG_SRQ_SIZE.get(in, c));
        return (int) ((bytes + 4095) / 4096);
    }

    /**
     * {@code CREATE_SRQ}: the context checked (size, stride, PD, page list, doorbell record), kept
     * in a firmware page; the engine's SRQ fetches WQEs from host memory by the linked list.
     */
    void createSrq(MemorySegment in, MemorySegment out, int maxLogSrqSize) throws Refused, CommandQueue.Deferred {
        createSrq(in, out, maxLogSrqSize, false);
    }

    /**
     * {@code CREATE_XRC_SRQ}: the same context layout ({@code xrc_srqc} shares {@code srqc}'s
     * fields, as the kernel's {@code create_xrc_srq_cmd} relies on) with an allocated
     * {@code xrcd} and the {@code cqn} its receives complete to.
     */
    void createXrcSrq(MemorySegment in, MemorySegment out, int maxLogSrqSize) throws Refused, CommandQueue.Deferred {
        createSrq(in, out, maxLogSrqSize, true);
    }

    private void createSrq(MemorySegment in, MemorySegment out, int maxLogSrqSize, boolean xrc) throws Refused, CommandQueue.Deferred {
        long c = Srq.CREATE_SRQ_IN_SRQC;
        int logSize = Srq.SRQC_LOG_SRQ_SIZE.get(in, c);
        if (logSize > maxLogSrqSize) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "log_srq_size " + logSize + " is above log_max_srq_sz " + maxLogSrqSize);
        }
        int stride = 16 << Srq.SRQC_LOG_RQ_STRIDE.get(in, c);
        if (stride < Srq.NEXT_SEG_SIZE + Qp.DS_SIZE) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "log_rq_stride " + Srq.SRQC_LOG_RQ_STRIDE.get(in, c)
                    + ": a WQE needs its next segment and one data segment (32 bytes)");
        }
        if (Srq.SRQC_WQ_SIGNATURE.get(in, c) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "wq_signature is not built in the model");
        }
        int xrcd = Srq.SRQC_XRCD.get(in, c);
        Cqs.MemCq xcq = null;
        if (xrc) {
            allocations.useXrcd(xrcd);
            xcq = cqs.useCq(Srq.SRQC_CQN.get(in, c));
        } else if (xrcd != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "xrcd " + xrcd + " in CREATE_SRQ: an XRC SRQ is CREATE_XRC_SRQ's");
        }
        if (Srq.SRQC_LOG_PAGE_SIZE.get(in, c) != 0 || Srq.SRQC_PAGE_OFFSET.get(in, c) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "the model takes SRQ buffers in 4 KiB pages at offset 0");
        }
        int pd = Srq.SRQC_PD.get(in, c);
        allocations.usePd(pd);
        long dbr = in.get(BE64, c + Srq.SRQC_DBR_ADDR);
        if ((dbr & 3) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, String.format("dbr_addr 0x%x is not 4-byte aligned", dbr));
        }
        int wqes = 1 << logSize;
        long[] pas = DataPath.pas(in, Srq.CREATE_SRQ_IN_PAS, srqPages(in), "SRQ");
        FirmwarePages.Slot ctx = pages.store(SRQ_CONTEXT_BYTES, in, c, Srq.SRQC_SIZE, "a context");
        HwSrq hw;
        try {
            int sges = Math.max(1, (stride - Srq.NEXT_SEG_SIZE) / Qp.DS_SIZE);
            hw = xrc ? dp.engine.sw2hwXrcSrq(pd, xrcd, xcq.hw, wqes, sges) : dp.engine.sw2hwSrq(pd, wqes, sges);
        } catch (HwCommandException e) {
            pages.free(ctx);
            throw Refused.of(e);
        }
        MemSrq s = new MemSrq(hw, pas, dbr, wqes, stride, ctx, xrc);
        hw.queue().fetcher(s);
        srqs.set(hw.srqn, s);
        allocations.uctxs.own(Uctxs.Kind.SRQ, hw.srqn);
        Pages.INDEX24.set(out, 0, hw.srqn);
    }

    /**
     * The SRQ a command names, of the kind its opcode is for: the {@code _XRC_SRQ} commands take
     * XRC SRQs only, the {@code _SRQ} / {@code ARM_RQ} ones basic SRQs only.
     */
    private MemSrq liveSrq(int srqn, boolean xrc) throws Refused {
        MemSrq s = srqn >= 0 && srqn < srqs.length() ? srqs.get(srqn) : null;
        if (s == null || s.xrc != xrc) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, (xrc ? "XRC SRQ 0x" : "SRQ 0x")
                    + Integer.toHexString(srqn) + (s == null ? " does not exist" : xrc ? " is a basic SRQ" : " is an XRC SRQ (the _XRC_SRQ commands take it)"));
        }
        allocations.uctxs.check(Uctxs.Kind.SRQ, srqn, "SRQ 0x" + Integer.toHexString(srqn));
        return s;
    }

    /** {@code QUERY_SRQ}: the context as created, with the armed limit ({@code lwm}, 0 once the event fired). */
    void querySrq(MemorySegment in, MemorySegment out, boolean xrc) throws Refused {
        MemSrq s = liveSrq(Pages.INDEX24.get(in, 0), xrc);
        pages.load(s.context, out, Srq.QUERY_SRQ_OUT_SRQC, Srq.SRQC_SIZE, "SRQ");
        Srq.SRQC_LWM.set(out, Srq.QUERY_SRQ_OUT_SRQC, s.hw.limit());
    }

    /** {@code ARM_RQ} with op_mod SRQ: arms the SRQ's limit event at {@code lwm} (0 disarms). RQ objects are not built. */
    void armRq(MemorySegment in, boolean xrc) throws Refused {
        int opMod = in.get(BE32, 4) & 0xffff;
        if (opMod != Srq.ARM_RQ_OP_MOD_SRQ) { // MLX5_ARM_RQ_IN_OP_MOD_SRQ and MLX5_ARM_XRC_SRQ_IN_OP_MOD_XRC_SRQ are both 1
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, (xrc ? "ARM_XRC_SRQ" : "ARM_RQ") + " op_mod " + opMod
                    + (xrc ? ": op_mod 1 (XRC SRQ) is the only one" : ": only SRQs (op_mod 1) are built, no RQ objects"));
        }
        MemSrq s = liveSrq(Pages.INDEX24.get(in, 0), xrc);
        try {
            s.hw.arm(in.get(BE16, Srq.ARM_RQ_IN_LWM) & 0xffff);
        } catch (HwCommandException e) {
            throw Refused.of(e);
        }
    }

    /** {@code DESTROY_SRQ}: refused while a QP receives through it. */
    void destroySrq(MemorySegment in, boolean xrc) throws Refused {
        int srqn = Pages.INDEX24.get(in, 0);
        MemSrq s = liveSrq(srqn, xrc);
        try {
            dp.engine.hw2swSrq(s.hw);
        } catch (HwCommandException e) {
            throw Refused.of(e);
        }
        retire(s);
        srqs.set(srqn, null);
        allocations.uctxs.release(Uctxs.Kind.SRQ, srqn);
        pages.free(s.context);
    }

    /**
     * An SRQ in host memory: the device walks the WQEs' linked list from index 0 (the list the
     * library built), taking as many as the doorbell record's counter says were posted, and
     * remembers which buffer index each engine slot came from: a receive completion reports that
     * index ({@code wqe_counter}), which the library frees back to its list.
     */
    final class MemSrq implements RecvFetcher {
        /** Made by {@code CREATE_XRC_SRQ}: the {@code _XRC_SRQ} commands take it, the basic ones do not. */
        final boolean xrc;
        final HwSrq hw;
        final long[] pas;
        final long dbr;
        final int wqes;
        final int stride;
        final FirmwarePages.Slot context;
        /** Engine slot → buffer index of the WQE in it (written under the queue's consumer lock, before the slot is handed out). */
        private final int[] indexOfSlot;
        /** Under the queue's consumer lock: WQEs taken from the list, and the index of the next one. */
        private int taken;
        /** WQEs fetched (written under the queue's consumer lock). */
        final Tally wqesFetched = new Tally();
        private int next;
        private final MemorySegment wqe;
        private final MemorySegment word = MemorySegment.ofArray(new byte[4]);

        MemSrq(HwSrq hw, long[] pas, long dbr, int wqes, int stride, FirmwarePages.Slot context, boolean xrc) {
            this.xrc = xrc;
            this.hw = hw;
            this.pas = pas;
            this.dbr = dbr;
            this.wqes = wqes;
            this.stride = stride;
            this.context = context;
            this.indexOfSlot = new int[hw.queue().size()];
            this.wqe = MemorySegment.ofArray(new byte[stride]);
        }

        int wqeIndex(long slot) {
            return indexOfSlot[(int) slot & indexOfSlot.length - 1];
        }

        /** The counter in the doorbell record, minus the WQEs taken from the list (what an armed limit counts besides the ring). */
        @Override
        public long notFetched(RecvQueue q) {
            try {
                dp.port.read(dbr + Srq.DBR_COUNTER, word, 0, 4);
            } catch (IommuFault f) {
                dp.dmaFaults.incrementAndGet();
                return 0;
            }
            return Math.max(0, word.get(BE32, 0) - taken);
        }

        /** The counter in the doorbell record, then WQEs down the list. */
        @Override
        public long fetch(RecvQueue q, long head, long tail) {
            int posted;
            try {
                dp.port.read(dbr + Srq.DBR_COUNTER, word, 0, 4);
                posted = word.get(BE32, 0);
            } catch (IommuFault f) {
                dp.dmaFaults.incrementAndGet();
                return tail;
            }
            long t = tail;
            while (posted - taken > 0 && t - head < q.size()) {
                long off = (long) (next & wqes - 1) * stride;
                try {
                    dp.port.read(pas[(int) (off >>> 12)] + (off & 0xfff), wqe, 0, stride);
                } catch (IommuFault f) {
                    dp.dmaFaults.incrementAndGet();
                    break;
                }
                DataPath.dataSegments(wqe, Srq.NEXT_SEG_SIZE, stride, q.slot(t));
                indexOfSlot[(int) t & indexOfSlot.length - 1] = next & wqes - 1;
                next = wqe.get(BE16, Srq.NEXT_WQE_INDEX) & 0xffff;
                taken++;
                t++;
                wqesFetched.increment(); // under the queue's consumer lock
            }
            return t;
        }
    }
}
