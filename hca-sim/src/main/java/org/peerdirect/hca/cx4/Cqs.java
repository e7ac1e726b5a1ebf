package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.ToIntFunction;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.CqeSink;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * Completion queues ({@code CREATE_CQ}, {@code DESTROY_CQ}, {@code QUERY_CQ}, the CQ doorbell;
 * the driver side is {@code mlx5_ib}'s {@code cq.c} and {@code mlx5_core}'s {@code cq.c}): a CQ is
 * a ring of 64-byte CQEs in the driver's pages ({@code pas}) or in a DevX umem
 * ({@code cq_umem_valid}; its doorbell record too with {@code dbr_umem_valid}); the engine's CQ writer hands each
 * completion to {@link MemCq#write}, which writes the CQE by DMA, the owner byte last. The
 * overrun check reads the consumer counter from the CQ's doorbell record. A CQ's context (256 B)
 * lives in the firmware's pages.
 *
 * <p>Lock rules: {@link #cqs} is an atomic array written by the firmware thread and read by
 * doorbell and engine threads; a CQ's CQE writes run under the engine CQ's producer lock.
 */
final class Cqs {

    static final int CQ_CONTEXT_BYTES = 256;

    private final DataPath dp;
    private final Eqs eqs;
    private final Allocations allocations;
    private final Caps caps;
    private final FirmwarePages pages;
    private final Umems umems;
    /** The {@code wqe_counter} a CQE reports for a completion (the queue's own count of its WQE). */
    private final ToIntFunction<Cqe> wqeCounter;
    private final AtomicReferenceArray<MemCq> cqs = new AtomicReferenceArray<>(HcaDevice.MAX_CQ);
    /**
     * The DPA threads CQs may be bound to ({@code cqc.apu_cq}); null on a function without a DPA.
     * Set once by the firmware before commands run.
     */
    volatile ApuThreads apu;
    /** CQEs written by destroyed CQs: a CQ's count moves here as it leaves the table, just before (a total read then may count it twice). */
    private final AtomicLong retiredCqes = new AtomicLong();

    Cqs(DataPath dp, Eqs eqs, Allocations allocations, Caps caps, FirmwarePages pages, Umems umems, ToIntFunction<Cqe> wqeCounter) {
        this.umems = umems;
        this.dp = dp;
        this.eqs = eqs;
        this.allocations = allocations;
        this.caps = caps;
        this.pages = pages;
        this.wqeCounter = wqeCounter;
    }

    /** The DPA side of a CQ whose element is a DPA thread (the firmware's DPA unit). */
    interface ApuThreads {
        /** Binds CQ {@code cqn} to thread {@code tid}, which must be a live DPA thread of {@code uid}. */
        void bind(int cqn, int tid, int uid) throws Refused;

        void unbind(int cqn);

        /** A completion event on CQ {@code cqn}, bound to {@code tid}: the thread is triggered. */
        void event(int cqn, int tid);
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.CREATE_CQ, CommandTable.withList(Cq.CREATE_CQ_IN_PAS, in -> in.byteSize() >= Cq.CREATE_CQ_IN_PAS
                && Devx.CQ_UMEM_VALID.get(in, 0) != 0 ? 0 : cqPages(in)), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createCq(in, out, caps.cur(HcaCap.LOG_MAX_CQ_SZ)));
        t.add(Mlx5Cmd.DESTROY_CQ, (opMod, in, out) -> destroyCq(in));
        t.add(Mlx5Cmd.QUERY_CQ, CommandTable.MIN_INPUT, (int) Cq.CREATE_CQ_IN_PAS, (opMod, in, out) -> queryCq(in, out));
    }

    int count() {
        return (int) DataPath.sum(cqs, c -> 1);
    }

    long cqesWritten() {
        return retiredCqes.get() + DataPath.sum(cqs, c -> c.written.get());
    }

    private void retire(MemCq c) {
        retiredCqes.addAndGet(c.written.get());
    }

    /** Force close: every CQ dropped (the engine was reset first). */
    void dropAll() {
        for (int i = 0; i < cqs.length(); i++) {
            MemCq c = cqs.get(i);
            if (c != null) {
                retire(c);
                cqs.set(i, null);
            }
        }
    }

    /** Pages of a CQ's ring: 64-byte CQEs, 4 KiB pages. */
    static int cqPages(MemorySegment in) {
        long bytes = (long) Cq.CQE_SIZE << Math.min(24, Cq.CQC_LOG_CQ_SIZE.get(in, Cq.CREATE_CQ_IN_CQC));
        return (int) ((bytes + 4095) / 4096);
    }

    void createCq(MemorySegment in, MemorySegment out, int maxLogCqSize) throws Refused, CommandQueue.Deferred {
        long c = Cq.CREATE_CQ_IN_CQC;
        int logSize = Cq.CQC_LOG_CQ_SIZE.get(in, c);
        int uar = Cq.CQC_UAR_PAGE.get(in, c);
        int eqn = Cq.CQC_C_EQN.get(in, c);
        if (Cq.CQC_CQE_SZ.get(in, c) != Cq.CQE_SZ_64) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, "cqe_sz " + Cq.CQC_CQE_SZ.get(in, c) + ": the model writes 64-byte CQEs");
        }
        if (logSize > maxLogCqSize) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, "log_cq_size " + logSize + " is above log_max_cq_sz " + maxLogCqSize);
        }
        if (Cq.CQC_LOG_PAGE_SIZE.get(in, c) != 0 || Cq.CQC_PAGE_OFFSET.get(in, c) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, "the model takes CQ rings in 4 KiB pages at offset 0");
        }
        allocations.useUar(uar);
        boolean apuCq = Devx.CQC_APU_CQ.get(in, c) != 0;
        if (apuCq) {
            checkApu(in, c);
        } else if (eqs.eq(eqn) == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "c_eqn " + eqn + " names no EQ");
        }
        long dbr = in.get(BE64, c + Cq.CQC_DBR_ADDR);
        if ((dbr & 7) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, String.format("dbr_addr 0x%x is not 8-byte aligned", dbr));
        }
        QueueMemory ring = ring(in, logSize);
        QueueMemory dbrMem;
        FirmwarePages.Slot ctx;
        try {
            dbrMem = Devx.CQC_DBR_UMEM_VALID.get(in, c) == 0 ? QueueMemory.at(dp.port, dbr, 8)
                    : umems.umem(Devx.CQC_DBR_UMEM_ID.get(in, c), "CREATE_CQ's doorbell record").record(dbr, 8, "the CQ's doorbell record");
        } catch (Refused r) {
            ring.release();
            throw r;
        }
        try {
            ctx = pages.store(CQ_CONTEXT_BYTES, in, c, Cq.CQC_SIZE, "a context");
        } catch (Refused | CommandQueue.Deferred e) {
            ring.release();
            dbrMem.release();
            throw e;
        }
        MemCq mc = new MemCq(logSize, ring, dbrMem, uar, apuCq ? -1 : eqn, ctx);
        mc.dpaThread = apuCq ? eqn : -1;
        HwCq hw;
        try {
            hw = dp.engine.sw2hwCq(1 << logSize, mc);
        } catch (HwCommandException e) {
            pages.free(ctx);
            ring.release();
            dbrMem.release();
            throw Refused.of(e);
        }
        mc.hw = hw;
        if (apuCq) {
            try {
                apu.bind(hw.cqn, eqn, allocations.uctxs.current());
            } catch (Refused r) { // not a live DPA thread of the command's uid: undo
                dp.engine.hw2swCq(hw);
                pages.free(ctx);
                ring.release();
                dbrMem.release();
                throw r;
            }
        }
        cqs.set(hw.cqn, mc);
        allocations.uctxs.own(Uctxs.Kind.CQ, hw.cqn);
        Pages.INDEX24.set(out, 0, hw.cqn);
    }

    /** {@code apu_cq}: a function with a DPA and element type thread (that it is a live thread of the command's uid: {@link ApuThreads#bind}). */
    private void checkApu(MemorySegment in, long c) throws Refused {
        if (apu == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, "apu_cq on a function without a DPA");
        }
        int type = Devx.CQC_APU_ELEMENT_TYPE.get(in, c);
        if (type != Devx.APU_ELEMENT_THREAD) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, "apu_element_type " + type
                    + ": the model binds CQs to DPA threads (0) only");
        }
    }

    /** The CQ's ring: its {@code pas} list, or {@code cq_umem_id} from {@code cq_umem_offset} ({@code cq_umem_valid}). */
    private QueueMemory ring(MemorySegment in, int logSize) throws Refused {
        if (Devx.CQ_UMEM_VALID.get(in, 0) == 0) {
            return QueueMemory.pas(dp.port, DataPath.pas(in, Cq.CREATE_CQ_IN_PAS, cqPages(in), "CQ"));
        }
        return umems.umem(in.get(BE32, Devx.CQ_UMEM_ID), "CREATE_CQ's ring").region(in.get(BE64, Devx.CQ_UMEM_OFFSET),
                (long) Cq.CQE_SIZE << logSize, "the CQ's ring of " + (1 << logSize) + " CQEs");
    }

    /** CQ {@code cqn} for a new QP or SRQ of the command's uid (the kernel's CQs too). */
    MemCq useCq(int cqn) throws Refused {
        MemCq c = cqn >= 0 && cqn < cqs.length() ? cqs.get(cqn) : null;
        if (c == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "CQ " + cqn + " does not exist");
        }
        allocations.uctxs.checkUse(Uctxs.Kind.CQ, cqn, "CQ " + cqn);
        return c;
    }

    /** CQ {@code cqn} for a command on it (query, destroy): the command's uid's, or the command is the kernel's. */
    MemCq liveCq(int cqn) throws Refused {
        MemCq c = cqn >= 0 && cqn < cqs.length() ? cqs.get(cqn) : null;
        if (c == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "CQ " + cqn + " does not exist");
        }
        allocations.uctxs.check(Uctxs.Kind.CQ, cqn, "CQ " + cqn);
        return c;
    }

    void destroyCq(MemorySegment in) throws Refused {
        MemCq c = liveCq(Pages.INDEX24.get(in, 0));
        try {
            dp.engine.hw2swCq(c.hw);
        } catch (HwCommandException e) {
            throw Refused.of(e);
        }
        retire(c);
        cqs.set(c.hw.cqn, null);
        if (c.dpaThread >= 0) {
            apu.unbind(c.hw.cqn);
        }
        allocations.uctxs.release(Uctxs.Kind.CQ, c.hw.cqn);
        c.ring.release();
        c.dbr.release();
        pages.free(c.context);
    }

    void queryCq(MemorySegment in, MemorySegment out) throws Refused {
        MemCq c = liveCq(Pages.INDEX24.get(in, 0));
        pages.load(c.context, out, Cq.CREATE_CQ_IN_CQC, Cq.CQC_SIZE, "CQ");
        Cq.CQC_PRODUCER_COUNTER.set(out, Cq.CREATE_CQ_IN_CQC, (int) c.hw.producerIndex() & 0xff_ffff);
        Cq.CQC_CONSUMER_COUNTER.set(out, Cq.CREATE_CQ_IN_CQC, (int) c.consumerIndex());
    }

    /** The engine's completion events: a completion EQE on the CQ's EQ, or a CQ error on the async EQ. */
    void event(HwCq cq, boolean overrun) {
        MemCq c = cqs.get(cq.cqn);
        if (c == null || c.hw != cq) {
            return;
        }
        MemorySegment d = MemorySegment.ofArray(new byte[28]);
        if (overrun) {
            d.set(BE32, 0, cq.cqn & 0xff_ffff);
            d.set(ValueLayout.JAVA_BYTE, 0x0b, (byte) Cq.CQ_ERROR_OVERRUN);
            eqs.postEvent(Eq.EVENT_CQ_ERROR, 0, d);
            return;
        }
        if (c.dpaThread >= 0) {
            apu.event(cq.cqn, c.dpaThread); // the element is a DPA thread: it runs instead of an EQE
            return;
        }
        d.set(BE32, 0x18, cq.cqn & 0xff_ffff);
        eqs.postTo(c.eqn, Eq.EVENT_COMP, d);
    }

    /** The CQ of {@code cqn}, or null. */
    MemCq cq(int cqn) {
        return cqn >= 0 && cqn < cqs.length() ? cqs.get(cqn) : null;
    }

    /** {@code CQ_DB} from a DPA outbox: arm CQ {@code cqn} with consumer index {@code ci}; false when there is no such CQ. */
    boolean arm(int cqn, int ci) {
        MemCq c = cq(cqn);
        if (c == null) {
            return false;
        }
        c.hw.arm(false, ci);
        return true;
    }

    /**
     * {@code RXT_DB} from a DPA outbox: a zero CQE, which writes nothing to the ring and signals
     * the CQ's element as a completion would (its DPA thread, or a completion EQE and MSI-X).
     */
    boolean zeroCqe(int cqn) {
        MemCq c = cq(cqn);
        if (c == null) {
            return false;
        }
        c.hw.zeroCqe(); // raised and counted by the CQ, then delivered through event()
        return true;
    }

    /**
     * The UAR CQ doorbell: {be32(sn << 28 | cmd | ci), be32(cqn)} as one 64-bit write (raw bytes in
     * {@code value}); a CQE already waiting at or past {@code ci} fires the arm at once.
     */
    boolean doorbell(int uar, long value) {
        long be = Long.reverseBytes(value);
        int word = (int) (be >>> 32);
        int cqn = (int) be & 0xff_ffff;
        MemCq c = cqn < cqs.length() ? cqs.get(cqn) : null;
        if (c == null || c.uar != uar) {
            return false;
        }
        c.hw.arm((word & Cq.DB_REQ_NOT_SOL) != 0, word & 0xff_ffff); // the ci rides in the arm word (mlx5_arm_cq)
        return true;
    }

    /** A CQ in host memory: the engine's {@link CqeSink}. */
    final class MemCq implements CqeSink {
        final int logSize;
        final QueueMemory ring;
        final QueueMemory dbr;
        final int uar;
        final int eqn;
        final FirmwarePages.Slot context;
        volatile HwCq hw;
        /** The DPA thread this CQ's events trigger ({@code apu_cq}), -1 for an EQ. */
        volatile int dpaThread = -1;
        /** The CQE being written (under the engine CQ's lock). */
        private final MemorySegment cqe = MemorySegment.ofArray(new byte[Cq.CQE_SIZE]);
        /** CQEs written (under the engine CQ's lock). */
        final Tally written = new Tally();
        private final MemorySegment ci = MemorySegment.ofArray(new byte[4]);

        MemCq(int logSize, QueueMemory ring, QueueMemory dbr, int uar, int eqn, FirmwarePages.Slot context) {
            this.logSize = logSize;
            this.ring = ring;
            this.dbr = dbr;
            this.uar = uar;
            this.eqn = eqn;
            this.context = context;
        }

        @Override
        public void write(long index, Cqe c) {
            int counter = wqeCounter.applyAsInt(c);
            cqe.fill((byte) 0);
            int opcode;
            if (c.opcode == Cqe.OPCODE_ERROR) {
                opcode = c.isSend ? Cq.CQE_REQ_ERR : Cq.CQE_RESP_ERR;
                cqe.set(ValueLayout.JAVA_BYTE, Cq.CQE_SYNDROME, (byte) c.syndrome); // the mlx4 and mlx5 syndromes are the same values
                cqe.set(ValueLayout.JAVA_BYTE, Cq.CQE_VENDOR_ERR_SYND, (byte) c.vendorSyndrome);
                cqe.set(BE32, Cq.CQE_SOP_DROP_QPN, (c.isSend ? c.errorOpcode : 0) << 24 | c.qpn & 0xff_ffff);
            } else if (c.isSend) {
                opcode = Cq.CQE_REQ;
                cqe.set(BE32, Cq.CQE_SOP_DROP_QPN, c.opcode << 24 | c.qpn & 0xff_ffff);
                cqe.set(BE32, Cq.CQE_BYTE_CNT, c.byteCnt);
            } else {
                opcode = switch (c.opcode) {
                    case Cqe.RECV_RDMA_WRITE_IMM -> Cq.CQE_RESP_WR_IMM;
                    case Cqe.RECV_SEND_IMM -> Cq.CQE_RESP_SEND_IMM;
                    default -> Cq.CQE_RESP_SEND;
                };
                cqe.set(BE32, Cq.CQE_SOP_DROP_QPN, c.qpn & 0xff_ffff);
                cqe.set(BE32, Cq.CQE_BYTE_CNT, c.byteCnt);
                cqe.set(BE32, Cq.CQE_IMM, c.imm);
                cqe.set(BE32, Cq.CQE_FLAGS_RQPN, ((c.flags & Cqe.FLAG_GRH) != 0 ? 1 << 28 : 0) | c.srcQp & 0xff_ffff);
                cqe.set(BE16, Cq.CQE_SLID, (short) c.slid);
            }
            if (!c.isSend) {
                cqe.set(BE32, Cq.CQE_SRQN, c.srqn); // mlx5_cqe64.srqn_uidx / mlx5_err_cqe.srqn: 0 without an SRQ
            }
            cqe.set(BE16, Cq.CQE_WQE_COUNTER, (short) counter);
            cqe.set(ValueLayout.JAVA_BYTE, Cq.CQE_OP_OWN, (byte) (opcode << 4 | (int) (index >>> logSize & 1)));
            long off = (index & (1L << logSize) - 1) * Cq.CQE_SIZE;
            try {
                ring.port().writeDescriptor(ring.address(off), cqe, 0, Cq.CQE_SIZE); // the word with the owner byte last
                written.increment();
            } catch (IommuFault f) {
                dp.dmaFaults.incrementAndGet(); // the driver unmapped its ring under a live CQ: the IOMMU stopped it
            }
        }

        @Override
        public long consumerIndex() {
            try {
                dbr.port().read(dbr.address(Cq.DBR_SET_CI), ci, 0, 4);
            } catch (IommuFault f) {
                dp.dmaFaults.incrementAndGet();
                return hw.producerIndex() - (1L << logSize); // unreadable: treat the ring as full
            }
            return ci.get(BE32, 0) & 0xff_ffff;
        }
    }
}
