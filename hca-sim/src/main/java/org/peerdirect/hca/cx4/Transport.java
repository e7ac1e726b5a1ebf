package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.hca.cx4.ifc.Umr;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.CqeSink;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwQpState;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.hca.engine.QpCaps;
import org.peerdirect.hca.engine.QpCommand;
import org.peerdirect.hca.engine.QpContext;
import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.hca.engine.RecvWqe;
import org.peerdirect.hca.engine.SendWqe;
import org.peerdirect.hca.engine.UmrWqe;
import org.peerdirect.hca.engine.Wqe;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * The ConnectX-4+ data path: CQs, QPs and mkeys created by commands, with the shared transport
 * engine ({@link HcaDevice}) behind descriptors in host memory. The firmware side (commands) runs
 * on the firmware thread; the doorbell side on the thread that wrote the UAR, as the hardware's
 * doorbell processing starts with the PCIe write.
 *
 * <ul>
 * <li>A CQ is a ring of 64-byte CQEs in the driver's pages ({@code pas}); the engine's CQ writer
 * hands each completion to {@link MemCq#write}, which writes the CQE by DMA, the owner byte last.
 * The overrun check reads the consumer counter from the CQ's doorbell record.</li>
 * <li>A QP is one buffer (RQ first, SQ after it, as {@code mlx5_ib} lays it out) and a doorbell
 * record. A write to a BlueFlame register of the QP's UAR makes the device read the send
 * doorbell record and fetch every new WQE by DMA, basic block by basic block, into the engine's
 * send slots; receive WQEs are fetched when the responder needs one ({@link MemQp#fetchRecv}).</li>
 * <li>Contexts live in the firmware's pages (CQ 256 B, QP 512 B, mkey 64 B), written there by DMA:
 * a command that finds none free is parked for a page request, like {@code CREATE_EQ}.</li>
 * </ul>
 *
 * <p>Lock rules: {@link #cqs} and {@link #qps} are atomic arrays written by the firmware thread
 * and read by doorbell threads; a QP's send fetch is serialised by its {@link MemQp#sqLock} (the
 * doorbell processing of one SQ is sequential in hardware); receive fetches run under the engine
 * queue's consumer lock; a CQ's CQE writes under the engine CQ's producer lock.
 */
final class Transport {

    static final int CQ_CONTEXT_BYTES = 256;
    static final int QP_CONTEXT_BYTES = 512;
    static final int MKEY_CONTEXT_BYTES = 64;
    static final int SRQ_CONTEXT_BYTES = 128;
    /** Inline bytes one send WQE can carry in this model (the engine's slot capacity). */
    static final int MAX_INLINE = 512;
    /** Data segments one send WQE can carry (1 KiB WQEs: {@code max_wqe_sz_sq}). */
    static final int MAX_SEND_DS = 1024 / Qp.DS_SIZE;

    final HcaDevice engine;
    private final DmaPort port;
    private final Eqs eqs;
    private final Allocations allocations;
    private final Caps caps;
    private final FirmwarePages pages;
    private final AtomicReferenceArray<MemCq> cqs = new AtomicReferenceArray<>(HcaDevice.MAX_CQ);
    private final AtomicReferenceArray<MemQp> qps = new AtomicReferenceArray<>(HcaDevice.MAX_QP);
    /** srqn → the SRQ in host memory (set by the firmware thread, read by the data path). */
    private final AtomicReferenceArray<MemSrq> srqs = new AtomicReferenceArray<>(HcaDevice.MAX_SRQ);
    /** mkey index → its context slot (firmware thread only). */
    private final Map<Integer, FirmwarePages.Slot> mkeys = new HashMap<>();
    /**
     * What destroyed queues counted (WQEs fetched, of those carried by BlueFlame, CQEs written):
     * each live queue keeps its own {@link Tally}, so the data path of one queue shares no counter
     * with another's; a queue's counts move here when the queue leaves its table (firmware thread),
     * just before, so a total read at that instant may count it twice. A doorbell that races the
     * destroy of its QP after that (the QP already in ERR, its WQEs flushing) goes uncounted.
     */
    private final AtomicLong retiredWqes = new AtomicLong();
    private final AtomicLong retiredBlueFlame = new AtomicLong();
    private final AtomicLong retiredCqes = new AtomicLong();
    final AtomicLong badWqes = new AtomicLong();
    final AtomicLong dmaFaults = new AtomicLong();

    Transport(HcaDevice engine, DmaPort port, Eqs eqs, Allocations allocations, Caps caps, FirmwarePages pages) {
        this.engine = engine;
        this.port = port;
        this.eqs = eqs;
        this.allocations = allocations;
        this.caps = caps;
        this.pages = pages;
        engine.setEventHandler(this::cqEvent);
        engine.setAsyncEventHandler(new org.peerdirect.hca.engine.AsyncEventHandler() {
            @Override
            public void event(int type, int number) {
                asyncEvent(type, number);
            }

            /** {@code PORT_CHANGE} with the subtype, the port number in the high nibble of data byte 8 ({@code mlx5_eqe_port_state}). */
            @Override
            public void portEvent(int port, int subtype) {
                MemorySegment d = MemorySegment.ofArray(new byte[28]);
                d.set(ValueLayout.JAVA_BYTE, Eq.PORT_CHANGE_PORT, (byte) (port << 4));
                eqs.postEvent(Eq.EVENT_PORT_CHANGE, subtype, d);
            }
        });
    }

    /** The data-path commands. */
    void register(CommandTable t) {
        t.add(Mlx5Cmd.CREATE_CQ, CommandTable.withList(Cq.CREATE_CQ_IN_PAS, Transport::cqPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createCq(in, out, caps.cur(HcaCap.LOG_MAX_CQ_SZ)));
        t.add(Mlx5Cmd.DESTROY_CQ, (opMod, in, out) -> destroyCq(in));
        t.add(Mlx5Cmd.QUERY_CQ, CommandTable.MIN_INPUT, (int) Cq.CREATE_CQ_IN_PAS, (opMod, in, out) -> queryCq(in, out));
        t.add(Mlx5Cmd.CREATE_QP, CommandTable.withList(Qp.CREATE_QP_IN_PAS, Transport::qpPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createQp(in, out, caps.cur(HcaCap.LOG_MAX_QP_SZ)));
        for (int op : new int[] { Mlx5Cmd.RST2INIT_QP, Mlx5Cmd.INIT2INIT_QP, Mlx5Cmd.INIT2RTR_QP, Mlx5Cmd.RTR2RTS_QP, Mlx5Cmd.RTS2RTS_QP,
                Mlx5Cmd.SQERR2RTS_QP }) {
            t.add(op, Qp.MODIFY_IN_LEN, CommandTable.MIN_OUTPUT, (opMod, in, out) -> modifyQp(op, in));
        }
        t.add(Mlx5Cmd.QP_2ERR, (opMod, in, out) -> modifyQp(Mlx5Cmd.QP_2ERR, in));
        t.add(Mlx5Cmd.QP_2RST, (opMod, in, out) -> modifyQp(Mlx5Cmd.QP_2RST, in));
        t.add(Mlx5Cmd.QUERY_QP, CommandTable.MIN_INPUT, Qp.QUERY_OUT_LEN, (opMod, in, out) -> queryQp(in, out));
        t.add(Mlx5Cmd.DESTROY_QP, (opMod, in, out) -> destroyQp(in));
        t.add(Mlx5Cmd.CREATE_SRQ, CommandTable.withList(Srq.CREATE_SRQ_IN_PAS, Transport::srqPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createSrq(in, out, caps.cur(HcaCap.LOG_MAX_SRQ_SZ)));
        t.add(Mlx5Cmd.DESTROY_SRQ, (opMod, in, out) -> destroySrq(in, false));
        t.add(Mlx5Cmd.QUERY_SRQ, CommandTable.MIN_INPUT, Srq.QUERY_SRQ_OUT_LEN, (opMod, in, out) -> querySrq(in, out, false));
        t.add(Mlx5Cmd.ARM_RQ, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (opMod, in, out) -> armRq(in, false));
        t.add(Mlx5Cmd.CREATE_XRC_SRQ, CommandTable.withList(Srq.CREATE_SRQ_IN_PAS, Transport::srqPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createXrcSrq(in, out, caps.cur(HcaCap.LOG_MAX_SRQ_SZ)));
        t.add(Mlx5Cmd.DESTROY_XRC_SRQ, (opMod, in, out) -> destroySrq(in, true));
        t.add(Mlx5Cmd.QUERY_XRC_SRQ, CommandTable.MIN_INPUT, Srq.QUERY_SRQ_OUT_LEN, (opMod, in, out) -> querySrq(in, out, true));
        // no op_mod passes the table's check, and ARM_XRC_SRQ needs op_mod 1: refused either way (as before the table; see armRq)
        t.add(Mlx5Cmd.ARM_XRC_SRQ, (opMod, in, out) -> armRq(in, true));
        t.add(Mlx5Cmd.CREATE_MKEY, CommandTable.withList(Mkey.CREATE_IN_MTT, Transport::mttEntries), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createMkey(in, out));
        t.add(Mlx5Cmd.DESTROY_MKEY, (opMod, in, out) -> destroyMkey(in));
        t.add(Mlx5Cmd.QUERY_SPECIAL_CONTEXTS, CommandTable.MIN_INPUT, Mkey.SPECIAL_CONTEXTS_OUT_LEN, (opMod, in, out) -> {
            // the reserved lkey (bus addresses) is key 0; no dump-fill mkey is built
            out.set(BE32, Mkey.SPECIAL_OUT_RESD_LKEY, 0);
            out.set(BE32, Mkey.SPECIAL_OUT_NULL_MKEY, HcaDevice.NULL_MKEY);
        });
    }

    int cqCount() {
        return (int) sum(cqs, c -> 1);
    }

    int qpCount() {
        return engine.qps().size();
    }

    /** {@code f} summed over the live entries of {@code table}. */
    private static <T> long sum(AtomicReferenceArray<T> table, java.util.function.ToLongFunction<T> f) {
        long n = 0;
        for (int i = 0; i < table.length(); i++) {
            T t = table.get(i);
            n += t == null ? 0 : f.applyAsLong(t);
        }
        return n;
    }

    /** WQEs fetched from host memory or taken from a BlueFlame write, by every queue so far. */
    long wqesFetched() {
        return retiredWqes.get() + sum(qps, q -> q.sqWqes.get() + q.rqWqesFetched.get()) + sum(srqs, s -> s.wqesFetched.get());
    }

    /** Of those, the send WQEs a BlueFlame write carried, which the device did not read by DMA. */
    long wqesBlueFlame() {
        return retiredBlueFlame.get() + sum(qps, q -> q.sqWqesBlueFlame.get());
    }

    long cqesWritten() {
        return retiredCqes.get() + sum(cqs, c -> c.written.get());
    }

    private void retire(MemQp q) {
        retiredWqes.addAndGet(q.sqWqes.get() + q.rqWqesFetched.get());
        retiredBlueFlame.addAndGet(q.sqWqesBlueFlame.get());
    }

    private void retire(MemSrq s) {
        retiredWqes.addAndGet(s.wqesFetched.get());
    }

    private void retire(MemCq c) {
        retiredCqes.addAndGet(c.written.get());
    }

    int mkeyCount() {
        return mkeys.size();
    }

    /** Objects that keep a graceful teardown from going. */
    int live() {
        return cqCount() + qpCount() + mkeyCount() + srqCount();
    }

    int srqCount() {
        return (int) sum(srqs, s -> 1);
    }

    /** Force close: every object dropped (QPs flushed and freed, keys revoked), the contexts' pages freed with the rest. */
    void dropAll() {
        engine.reset();
        for (int i = 0; i < cqs.length(); i++) {
            MemCq c = cqs.get(i);
            if (c != null) {
                retire(c);
                cqs.set(i, null);
            }
        }
        for (int i = 0; i < qps.length(); i++) {
            MemQp q = qps.get(i);
            if (q != null) {
                retire(q);
                qps.set(i, null);
            }
        }
        for (int i = 0; i < srqs.length(); i++) {
            MemSrq s = srqs.get(i);
            if (s != null) {
                retire(s);
                srqs.set(i, null);
            }
        }
        mkeys.clear();
    }

    private FirmwarePages.Slot context(int bytes, MemorySegment src, long off, int len) throws Refused, CommandQueue.Deferred {
        return pages.store(bytes, src, off, len, "a context");
    }

    private static long[] pas(MemorySegment in, long at, int n, String what) throws Refused {
        long[] pas = new long[n];
        for (int i = 0; i < n; i++) {
            pas[i] = in.get(BE64, at + 8L * i);
            if ((pas[i] & 0xfff) != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_PAGE, String.format("%s pas[%d] 0x%x is not 4 KiB aligned", what, i, pas[i]));
            }
        }
        return pas;
    }

    // ------------------------------------------------------------------ CQs

    /** Pages of a CQ's ring: 64-byte CQEs, 4 KiB pages. */
    static int cqPages(MemorySegment in) {
        long bytes = (long) Cq.CQE_SIZE << Math.min(24, Cq.CQC_LOG_CQ_SIZE.get(in, Cq.CREATE_CQ_IN_CQC));
        return (int) ((bytes + 4095) / 4096);
    }

    /** The pages an SRQ's WQEs span (the length check of CREATE_SRQ's page list). */
    static int srqPages(MemorySegment in) {
        long c = Srq.CREATE_SRQ_IN_SRQC;
        long bytes = (16L << Srq.SRQC_LOG_RQ_STRIDE.get(in, c)) << Math.min(15, Srq.SRQC_LOG_SRQ_SIZE.get(in, c));
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
        if (!allocations.uarAllocated(uar)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "uar_page " + uar + " is not allocated");
        }
        if (eqs.eq(eqn) == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "c_eqn " + eqn + " names no EQ");
        }
        long dbr = in.get(BE64, c + Cq.CQC_DBR_ADDR);
        if ((dbr & 7) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ, String.format("dbr_addr 0x%x is not 8-byte aligned", dbr));
        }
        long[] pas = pas(in, Cq.CREATE_CQ_IN_PAS, cqPages(in), "CQ");
        FirmwarePages.Slot ctx = context(CQ_CONTEXT_BYTES, in, c, Cq.CQC_SIZE);
        MemCq mc = new MemCq(logSize, pas, dbr, uar, eqn, ctx);
        HwCq hw;
        try {
            hw = engine.sw2hwCq(1 << logSize, mc);
        } catch (HwCommandException e) {
            pages.free(ctx);
            throw Refused.of(e);
        }
        mc.hw = hw;
        cqs.set(hw.cqn, mc);
        Pages.INDEX24.set(out, 0, hw.cqn);
    }

    private MemCq liveCq(int cqn) throws Refused {
        MemCq c = cqn >= 0 && cqn < cqs.length() ? cqs.get(cqn) : null;
        if (c == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "CQ " + cqn + " does not exist");
        }
        return c;
    }

    void destroyCq(MemorySegment in) throws Refused {
        MemCq c = liveCq(Pages.INDEX24.get(in, 0));
        try {
            engine.hw2swCq(c.hw);
        } catch (HwCommandException e) {
            throw Refused.of(e);
        }
        retire(c);
        cqs.set(c.hw.cqn, null);
        pages.free(c.context);
    }

    void queryCq(MemorySegment in, MemorySegment out) throws Refused {
        MemCq c = liveCq(Pages.INDEX24.get(in, 0));
        readContext(c.context, out, Cq.CREATE_CQ_IN_CQC, Cq.CQC_SIZE, "CQ");
        Cq.CQC_PRODUCER_COUNTER.set(out, Cq.CREATE_CQ_IN_CQC, (int) c.hw.producerIndex() & 0xff_ffff);
        Cq.CQC_CONSUMER_COUNTER.set(out, Cq.CREATE_CQ_IN_CQC, (int) c.consumerIndex());
    }

    /** The engine's completion events: a completion EQE on the CQ's EQ, or a CQ error on the async EQ. */
    private void cqEvent(HwCq cq, boolean overrun) {
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
        d.set(BE32, 0x18, cq.cqn & 0xff_ffff);
        eqs.postTo(c.eqn, Eq.EVENT_COMP, d);
    }

    /**
     * The engine's affiliated events of QPs and SRQs: an EQE on the EQ that asked for the type
     * ({@code struct mlx5_eqe_qp_srq}: the queue type and number); dropped when no EQ asked.
     */
    private void asyncEvent(int type, int number) {
        MemorySegment d = MemorySegment.ofArray(new byte[28]);
        boolean srq = type == org.peerdirect.hca.engine.AsyncEventHandler.SRQ_LIMIT;
        d.set(ValueLayout.JAVA_BYTE, Srq.EQE_QP_SRQ_TYPE, (byte) (srq ? Srq.EVENT_QUEUE_TYPE_RQ : Srq.EVENT_QUEUE_TYPE_QP));
        d.set(BE32, Srq.EQE_QP_SRQ_N, number & 0xff_ffff);
        eqs.postEvent(type, 0, d);
    }

    /** The UAR CQ doorbell: {be32(sn << 28 | cmd | ci), be32(cqn)} as one 64-bit write (raw bytes in {@code value}). */
    boolean cqDoorbell(int uar, long value) {
        long be = Long.reverseBytes(value);
        int word = (int) (be >>> 32);
        int cqn = (int) be & 0xff_ffff;
        MemCq c = cqn < cqs.length() ? cqs.get(cqn) : null;
        if (c == null || c.uar != uar) {
            return false;
        }
        c.hw.arm((word & Cq.DB_REQ_NOT_SOL) != 0);
        return true;
    }

    /** A CQ in host memory: the engine's {@link CqeSink}. */
    private final class MemCq implements CqeSink {
        final int logSize;
        final long[] pas;
        final long dbr;
        final int uar;
        final int eqn;
        final FirmwarePages.Slot context;
        volatile HwCq hw;
        /** The CQE being written (under the engine CQ's lock). */
        private final MemorySegment cqe = MemorySegment.ofArray(new byte[Cq.CQE_SIZE]);
        /** CQEs written (under the engine CQ's lock). */
        final Tally written = new Tally();
        private final MemorySegment ci = MemorySegment.ofArray(new byte[4]);

        MemCq(int logSize, long[] pas, long dbr, int uar, int eqn, FirmwarePages.Slot context) {
            this.logSize = logSize;
            this.pas = pas;
            this.dbr = dbr;
            this.uar = uar;
            this.eqn = eqn;
            this.context = context;
        }

        @Override
        public void write(long index, Cqe c) {
            MemQp q = qps.get(c.qpn);
            // a receive from an SRQ reports the SRQ's WQE index (an XRC target has no SRQ of its own: the CQE names the one the message did)
            MemSrq fromSrq = !c.isSend && c.srqn != 0 ? srqs.get(c.srqn) : null;
            int counter = fromSrq != null ? fromSrq.wqeIndex(c.wqeIndex)
                    : q == null ? (int) c.wqeIndex : c.isSend ? q.sqWqeCounter(c.wqeIndex) : q.rqWqeCounter(c.wqeIndex);
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
            long at = pas[(int) (off >>> 12)] + (off & 0xfff);
            try {
                port.writeDescriptor(at, cqe, 0, Cq.CQE_SIZE); // the word with the owner byte last
                written.increment();
            } catch (IommuFault f) {
                dmaFaults.incrementAndGet(); // the driver unmapped its ring under a live CQ: the IOMMU stopped it
            }
        }

        @Override
        public long consumerIndex() {
            try {
                port.read(dbr + Cq.DBR_SET_CI, ci, 0, 4);
            } catch (IommuFault f) {
                dmaFaults.incrementAndGet();
                return hw.producerIndex() - (1L << logSize); // unreadable: treat the ring as full
            }
            return ci.get(BE32, 0) & 0xff_ffff;
        }
    }

    // ------------------------------------------------------------------ QPs

    /** Pages of a QP's buffer: the RQ (2^log_rq_size × 16 << log_rq_stride bytes), then the SQ (2^log_sq_size × 64). */
    static int qpPages(MemorySegment in) {
        long c = Qp.IN_QPC;
        long rq = Qp.QPC_RQ_TYPE.get(in, c) == Qp.RQ_REGULAR ? (1L << Math.min(15, Qp.QPC_LOG_RQ_SIZE.get(in, c))) << 4 + Qp.QPC_LOG_RQ_STRIDE.get(in, c) : 0;
        long sq = Qp.QPC_NO_SQ.get(in, c) != 0 ? 0 : (1L << Math.min(15, Qp.QPC_LOG_SQ_SIZE.get(in, c))) * Qp.SEND_WQE_BB;
        return (int) ((rq + sq + 4095) / 4096);
    }

    void createQp(MemorySegment in, MemorySegment out, int maxLogQpSz) throws Refused, CommandQueue.Deferred {
        long c = Qp.IN_QPC;
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
        if (xrc && !allocations.xrcdAllocated(xrcd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "xrcd " + xrcd + " is not allocated");
        }
        if (xrc && rqType == Qp.RQ_REGULAR) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "an XRC QP has no receive queue of its own (rq_type SRQ 1 or zero-length 3)");
        }
        MemSrq srq = null;
        // an XRC QP's srqn (the driver's internal SRQ, mlx5_ib's devr->s0) receives nothing: not read
        if (rqType == Srq.RQ_SRQ && !xrc) {
            int srqn = Srq.QPC_SRQN.get(in, c);
            srq = srqn >= 0 && srqn < srqs.length() ? srqs.get(srqn) : null;
            if (srq == null) {
                throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "srqn 0x" + Integer.toHexString(srqn)
                        + " names no SRQ");
            }
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
        if (!allocations.uarAllocated(uar)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "uar_page " + uar + " is not allocated");
        }
        int pd = Qp.QPC_PD.get(in, c);
        if (!xrcTarget && !allocations.pdAllocated(pd)) { // an XRC target's PD (mlx5_ib's devr->p0) checks nothing: the SRQ's PD does
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        // an XRC initiator completes only sends, a target nothing: their receive CQ (and a target's send CQ) are not read
        MemCq scq = xrcTarget ? null : liveCq(Qp.QPC_CQN_SND.get(in, c));
        MemCq rcq = xrc ? null : liveCq(Qp.QPC_CQN_RCV.get(in, c));
        long dbr = in.get(BE64, c + Qp.QPC_DBR_ADDR);
        if ((dbr & 7) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, String.format("dbr_addr 0x%x is not 8-byte aligned", dbr));
        }
        long[] pas = pas(in, Qp.CREATE_QP_IN_PAS, qpPages(in), "QP");
        FirmwarePages.Slot ctx = context(QP_CONTEXT_BYTES, in, c, Qp.QPC_SIZE);
        int rqWqes = rqType == Qp.RQ_REGULAR ? 1 << logRq : 0;
        HwQp hw;
        try {
            QpCaps caps = new QpCaps(1 << logSq, rqWqes, HcaDevice.MAX_SGE, Math.max(1, rqStride / Qp.DS_SIZE), MAX_INLINE, false);
            hw = xrc ? engine.createXrcQp(pd, xrcd, xrcTarget, caps, scq == null ? null : scq.hw)
                    : engine.createQp(pd, engineSt, caps, scq.hw, rcq.hw, srq == null ? null : srq.hw);
        } catch (HwCommandException e) {
            pages.free(ctx);
            throw Refused.of(e);
        }
        MemQp q = new MemQp(hw, st, pas, dbr, uar, logSq, rqWqes, rqStride, ctx, srq);
        if (hw.recvQueue() != null) {
            hw.recvQueue().fetcher(q::fetchRecv);
        }
        q.ctx.port = Math.max(1, Qp.QPC_PRI_VHCA_PORT_NUM.get(in, c));
        qps.set(hw.qpn, q);
        Pages.INDEX24.set(out, 0, hw.qpn);
    }

    private MemQp liveQp(int qpn) throws Refused {
        MemQp q = qpn > 0 && qpn < qps.length() ? qps.get(qpn) : null;
        if (q == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "QP 0x" + Integer.toHexString(qpn) + " does not exist");
        }
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
                if (engine.ethernet() && !grh && (q.st == Qp.ST_RC || q.st == Qp.ST_XRC)) {
                    // RoCE has no LIDs: a connected QP's path is its peer's GID, or nothing
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_QP, "the port is Ethernet (RoCE): the primary path needs grh=1 and the remote GID");
                }
                // InfiniBand routes by the DLID inside the subnet (a GRH is for routers); RoCE by the GID
                ctx.dlid = !engine.ethernet() ? Qp.QPC_PRI_RLID.get(in, c) : grh ? Roce.lidOfGid(in, c + Qp.QPC_PRI_RGID) : 0;
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
        readContext(q.context, out, Qp.QUERY_OUT_QPC, Qp.QPC_SIZE, "QP");
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

    /** The QP a doorbell's {@code qpn_ds} word names, if it is on UAR page {@code uar}. */
    private MemQp qpOfDoorbell(int uar, int qpnDs) {
        int qpn = qpnDs >>> 8;
        MemQp q = qpn > 0 && qpn < qps.length() ? qps.get(qpn) : null;
        return q == null || q.uar != uar ? null : q;
    }

    /** A QP in host memory: its buffer, doorbell record and the fetch state. */
    private final class MemQp {
        /** The SRQ its receives come from, or null. */
        final MemSrq srq;
        final HwQp hw;
        final int st;
        final long[] pas;
        final long dbr;
        final int uar;
        final int sqBbs;
        final int rqWqes;
        final int rqStride;
        final long sqOffset;
        final FirmwarePages.Slot context;
        /** The context the transition commands built (firmware thread). */
        QpContext ctx = new QpContext();
        final ReentrantLock sqLock = new ReentrantLock();
        /** Guarded by sqLock: send WQE basic blocks fetched (16-bit counter as the doorbell record's). */
        int sqFetched;
        /** Guarded by sqLock: the engine's send producer index. */
        long sqTail;
        /** Send WQEs fetched, and of those the ones a BlueFlame write carried (written under sqLock). */
        final Tally sqWqes = new Tally();
        final Tally sqWqesBlueFlame = new Tally();
        /** Receive WQEs fetched (written under the engine receive queue's consumer lock). */
        final Tally rqWqesFetched = new Tally();
        /** Engine send slot → the WQE's wqe_index (its first basic block), for the CQE. */
        final int[] sqCounterOfSlot;
        /** Guarded by the engine receive queue's consumer lock: receive WQEs fetched. */
        int rqFetched;
        final int[] rqCounterOfSlot;
        private final MemorySegment bb = MemorySegment.ofArray(new byte[Qp.SEND_WQE_BB]);
        /** Guarded by sqLock: the basic block {@link #readBb} made current, {@code cur} from {@code curOff} (a BlueFlame burst, or {@link #bb}). */
        private MemorySegment cur = bb;
        private long curOff;
        /** A UMR WQE's basic blocks, copied together (under sqLock). */
        private final MemorySegment umrWqe = MemorySegment.ofArray(new byte[3 * Qp.SEND_WQE_BB]);
        private final MemorySegment word = MemorySegment.ofArray(new byte[4]);
        /**
         * Guarded by sqLock, set only while {@link #fetchSend} runs for a BlueFlame write: the
         * burst (from {@code bfOffset}), and the basic blocks {@code [bfFirst, bfFirst + bfBbs)} it carries.
         */
        private MemorySegment bf;
        private long bfOffset;
        private int bfFirst;
        private int bfBbs;
        /** A UD WQE's address vector as fetched (under sqLock). */
        private final MemorySegment av = MemorySegment.ofArray(new byte[Qp.AV_SIZE]);
        private final MemorySegment rwqe;

        MemQp(HwQp hw, int st, long[] pas, long dbr, int uar, int logSq, int rqWqes, int rqStride, FirmwarePages.Slot context, MemSrq srq) {
            this.srq = srq;
            this.hw = hw;
            this.st = st;
            this.pas = pas;
            this.dbr = dbr;
            this.uar = uar;
            this.sqBbs = 1 << logSq;
            // the buffer's RQ part: none for a zero-length or SRQ receive side, whatever the engine keeps for it
            this.rqWqes = rqWqes;
            this.rqStride = rqStride;
            this.sqOffset = (long) rqWqes * rqStride;
            this.context = context;
            this.sqCounterOfSlot = new int[hw.sqSize()];
            this.rqCounterOfSlot = new int[hw.recvQueue() == null ? 1 : hw.recvQueue().size()];
            this.rwqe = MemorySegment.ofArray(new byte[Math.max(16, rqStride)]);
        }

        int sqWqeCounter(long slot) {
            return sqCounterOfSlot[(int) slot & sqCounterOfSlot.length - 1];
        }

        int rqWqeCounter(long slot) {
            return srq != null ? srq.wqeIndex(slot) : rqCounterOfSlot[(int) slot & rqCounterOfSlot.length - 1];
        }

        /** 2RST: the hardware's counters start again from zero, as the driver's do. */
        void reset() {
            sqLock.lock();
            try {
                sqFetched = 0;
                sqTail = hw.sqConsumerIndex();
            } finally {
                sqLock.unlock();
            }
            rqFetched = 0; // the engine queue was discarded under its lock; no fetch runs in RST
        }

        private long addr(long bufOffset) {
            return pas[(int) (bufOffset >>> 12)] + (bufOffset & 0xfff);
        }

        private int readDbr(long off) {
            port.read(dbr + off, word, 0, 4);
            return word.get(BE32, 0);
        }

        /** Makes send basic block {@code n} (modulo the SQ) current ({@link #cur}): in the BlueFlame write that carried it, else read by DMA into {@link #bb}. */
        private void readBb(int n) {
            if (bf != null && (n - bfFirst & 0xffff) < bfBbs) {
                cur = bf; // read in place: the burst is stable while the write is being handled
                curOff = bfOffset + (long) (n - bfFirst & 0xffff) * Qp.SEND_WQE_BB;
                return;
            }
            port.read(addr(sqOffset + (long) (n & sqBbs - 1) * Qp.SEND_WQE_BB), bb, 0, Qp.SEND_WQE_BB);
            cur = bb;
            curOff = 0;
        }

        /**
         * The doorbell's work: every WQE up to the target, into the engine's slots; then the engine
         * runs them. The target is what the send doorbell record shows, or, for a BlueFlame write
         * ({@code burst} not null: {@code burstLength} bytes from {@code burstOffset}), the end of
         * the WQE it carries, when that WQE lies ahead within the ring and the burst holds all of
         * it; a burst that does not (stale, torn or short) is taken as a plain doorbell.
         */
        void fetchSend(MemorySegment burst, long burstOffset, int burstLength) {
            sqLock.lock();
            try {
                if (hw.state() == HwQpState.RST || hw.xrcTarget()) { // an XRC target has no send queue to fetch
                    return;
                }
                int target = -1;
                if (burst != null) {
                    int idx = burst.get(BE32, burstOffset + Qp.CTRL_OPMOD_IDX_OPCODE) >>> 8 & 0xffff;
                    int bbs = ((burst.get(BE32, burstOffset + Qp.CTRL_QPN_DS) & 0x3f) * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
                    if (bbs > 0 && bbs * Qp.SEND_WQE_BB <= burstLength && (idx - sqFetched & 0xffff) + bbs <= sqBbs) {
                        bf = burst;
                        bfOffset = burstOffset;
                        bfFirst = idx;
                        bfBbs = bbs;
                        target = idx + bbs & 0xffff;
                    }
                }
                if (target < 0) {
                    try {
                        target = readDbr(Qp.DBR_SND) & 0xffff;
                    } catch (IommuFault f) {
                        dmaFaults.incrementAndGet();
                        return;
                    }
                }
                while ((target - sqFetched & 0xffff) != 0) {
                    if (sqTail - hw.sqConsumerIndex() >= hw.sqSize()) {
                        break; // the driver rang past what its ring can hold: the rest waits for the next doorbell
                    }
                    SendWqe w = hw.sqSlot(sqTail);
                    int used;
                    try {
                        used = decode(w);
                        if (used <= 0) {
                            used = malformed(w);
                        }
                    } catch (IommuFault f) {
                        dmaFaults.incrementAndGet();
                        return;
                    }
                    if (bf != null && (sqFetched - bfFirst & 0xffff) < bfBbs) {
                        sqWqesBlueFlame.increment();
                    }
                    sqCounterOfSlot[(int) sqTail & sqCounterOfSlot.length - 1] = sqFetched & 0xffff;
                    sqFetched = sqFetched + used & 0xffff;
                    sqTail++;
                    sqWqes.increment();
                }
                hw.sqDoorbellRecord(sqTail);
            } finally {
                bf = null; // the burst is the caller's: never kept past the write
                cur = bb;
                sqLock.unlock();
            }
            hw.ringSqDoorbell();
        }

        /**
         * A WQE {@link #decode} refused: the slot completes with {@code LOCAL_QP_OP_ERR} when the
         * engine reaches it (the WQEs before it run, those after it flush), as the hardware answers
         * a WQE it cannot parse with an error CQE carrying its {@code wqe_counter} rather than
         * dropping it: a user waiting for that completion gets one. The device steps over it by its
         * DS count (one basic block when that is 0), as it steps over any WQE. Returns the blocks.
         */
        private int malformed(SendWqe w) {
            badWqes.incrementAndGet();
            readBb(sqFetched);
            int ds = cur.get(BE32, curOff + Qp.CTRL_QPN_DS) & 0x3f;
            w.opcode = Wqe.OP_MALFORMED;
            w.ctrl = Wqe.CTRL_CQ_UPDATE;
            w.numSge = 0;
            w.inlineLen = 0;
            w.length = 0;
            return Math.max(1, (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB);
        }

        /**
         * Decodes the WQE at {@link #sqFetched} into {@code w}: the control segment, the remote
         * address, atomic and datagram segments the opcode and service type call for, then data
         * or inline segments. Returns the basic blocks it spans, or 0 when it is malformed
         * (unknown opcode, QPN of another QP, DS count too small or too large).
         */
        private int decode(SendWqe w) {
            if (st == Qp.ST_REG_UMR) {
                return decodeUmr(w);
            }
            readBb(sqFetched);
            int opIdx = cur.get(BE32, curOff + Qp.CTRL_OPMOD_IDX_OPCODE);
            int qpnDs = cur.get(BE32, curOff + Qp.CTRL_QPN_DS);
            int ds = qpnDs & 0x3f;
            int opcode = opIdx & 0xff;
            if (qpnDs >>> 8 != hw.qpn || ds < 1 || ds > MAX_SEND_DS || !Wqe.valid(opcode)) {
                return 0;
            }
            int flags = cur.get(ValueLayout.JAVA_BYTE, curOff + Qp.CTRL_FM_CE_SE) & 0xff;
            w.opcode = opcode;
            w.ctrl = ((flags & Qp.CTRL_CQ_UPDATE) != 0 ? Wqe.CTRL_CQ_UPDATE : 0) | ((flags & Qp.CTRL_SOLICITED) != 0 ? Wqe.CTRL_SOLICITED : 0)
                    | ((flags & Qp.CTRL_FENCE) != 0 ? Wqe.CTRL_FENCE : 0);
            w.imm = cur.get(BE32, curOff + Qp.CTRL_IMM);
            w.numSge = 0;
            w.inlineLen = 0;
            w.length = 0;
            w.remoteQkey = -1;
            w.grh = false;
            int seg = 1; // in 16-byte units from the WQE's start
            int bbIndex = sqFetched;
            if (st == Qp.ST_XRC) {
                // the XRC segment: the SRQ at the target that receives the message (the XRCETH)
                if (ds < seg + 1) {
                    return 0;
                }
                w.xrcSrqn = cur.get(BE32, curOff + (long) seg * Qp.DS_SIZE + Qp.XRC_SRQN) & 0xff_ffff;
                seg++;
            }
            if (st == Qp.ST_UD) {
                if (ds < seg + Qp.AV_SIZE / Qp.DS_SIZE || opcode != Wqe.OP_SEND && opcode != Wqe.OP_SEND_IMM) {
                    return 0; // a UD QP only sends: RDMA, atomics and FLUSH there are malformed
                }
                // the 48-byte address vector: segments 1..3 of the WQE (may cross into the next BB)
                for (int i = 0; i < 3; i++) {
                    bbIndex = segAt(seg + i, bbIndex);
                    MemorySegment.copy(cur, curOff + (long) ((seg + i) & 3) * Qp.DS_SIZE, av, (long) i * Qp.DS_SIZE, Qp.DS_SIZE);
                }
                w.remoteQkey = av.get(BE32, Qp.AV_QKEY);
                w.remoteQpn = av.get(BE32, Qp.AV_DQP) & 0xff_ffff;
                // as for the QP's path: LID routing on InfiniBand, the GID on RoCE (a RoCE AV without GRH goes nowhere)
                boolean avGrh = (av.get(BE32, Qp.AV_GRH_GID_FL) & Qp.AV_GRH) != 0;
                w.dlid = !engine.ethernet() ? av.get(BE16, Qp.AV_RLID) & 0xffff : avGrh ? Roce.lidOfGid(av, Qp.AV_RGID) : 0;
                w.grh = avGrh || engine.ethernet();
                seg += 3;
            } else if (opcode == Wqe.OP_FLUSH) {
                // ctrl (FETH word in the immediate) + remote address (length in its last word), nothing after
                if (ds != seg + 1) {
                    return 0;
                }
                bbIndex = segAt(seg, bbIndex);
                long o = (long) (seg & 3) * Qp.DS_SIZE;
                w.remoteAddr = cur.get(BE64, curOff + o + Qp.RADDR_VA);
                w.rkey = cur.get(BE32, curOff + o + Qp.RADDR_RKEY);
                w.length = cur.get(BE32, curOff + o + Qp.RADDR_FLUSH_LEN) & 0xffff_ffffL;
                w.flushType = w.imm & Wqe.FLUSH_TYPE_MASK;
                w.flushLevel = (w.imm & Wqe.FLUSH_LEVEL_MASK) >>> Wqe.FLUSH_LEVEL_SHIFT;
                seg++;
            } else if (opcode == Wqe.OP_RDMA_WRITE || opcode == Wqe.OP_RDMA_WRITE_IMM || opcode == Wqe.OP_RDMA_READ || Wqe.hasAtomicSegment(opcode)) {
                if (ds < seg + 1) {
                    return 0;
                }
                bbIndex = segAt(seg, bbIndex);
                long o = (long) (seg & 3) * Qp.DS_SIZE;
                w.remoteAddr = cur.get(BE64, curOff + o + Qp.RADDR_VA);
                w.rkey = cur.get(BE32, curOff + o + Qp.RADDR_RKEY);
                seg++;
                if (Wqe.hasAtomicSegment(opcode)) {
                    if (ds < seg + 1) {
                        return 0;
                    }
                    bbIndex = segAt(seg, bbIndex);
                    o = (long) (seg & 3) * Qp.DS_SIZE;
                    long swapAdd = cur.get(BE64, curOff + o + Qp.ATOMIC_SWAP_ADD);
                    long compare = cur.get(BE64, curOff + o + Qp.ATOMIC_COMPARE);
                    w.compareAdd = opcode == Wqe.OP_ATOMIC_CS ? compare : swapAdd;
                    w.swap = swapAdd;
                    seg++;
                    if (opcode == Wqe.OP_ATOMIC_WRITE) {
                        w.length = 8; // the value travels in the atomic segment; data segments after it are malformed (the requester refuses them)
                    }
                }
            }
            // data or inline segments up to ds
            while (seg < ds) {
                bbIndex = segAt(seg, bbIndex);
                long o = (long) (seg & 3) * Qp.DS_SIZE;
                int bc = cur.get(BE32, curOff + o + Qp.DATA_BYTE_COUNT);
                if ((bc & Qp.INLINE_SEG) != 0) {
                    int len = bc & 0x3ff;
                    if (w.numSge != 0 || len > MAX_INLINE || (4 + len + 15) / 16 > ds - seg) {
                        return 0;
                    }
                    // the bytes follow the 4-byte header, possibly across basic blocks
                    long from = o + 4;
                    int copied = 0;
                    while (copied < len) {
                        long room = Qp.SEND_WQE_BB - from;
                        int n = (int) Math.min(room, len - copied);
                        MemorySegment.copy(cur, curOff + from, w.inline, copied, n);
                        copied += n;
                        if (copied < len) {
                            bbIndex++;
                            readBb(bbIndex);
                            from = 0;
                        }
                    }
                    w.inlineLen = len;
                    w.length = len;
                    w.ctrl |= Wqe.CTRL_INLINE;
                    seg = ds;
                    break;
                }
                if (w.numSge == w.maxSge()) {
                    return 0;
                }
                w.byteCount[w.numSge] = bc;
                w.lkey[w.numSge] = cur.get(BE32, curOff + o + Qp.DATA_LKEY);
                w.addr[w.numSge] = cur.get(BE64, curOff + o + Qp.DATA_ADDR);
                w.length += bc & 0xffff_ffffL;
                w.numSge++;
                seg++;
            }
            return (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
        }

        /**
         * A REG_UMR QP's WQE: the UMR control segment, the mkey segment and the data segment of the
         * translation list, into the slot's {@link UmrWqe} (the engine fetches the list when it
         * executes the request). Anything but a UMR, or a UMR of the wrong size or with its list
         * inline (not built), is malformed.
         */
        private int decodeUmr(SendWqe w) {
            readBb(sqFetched);
            int ds = cur.get(BE32, curOff + Qp.CTRL_QPN_DS) & 0x3f;
            // only the basic blocks the WQE spans (at most those of a UMR with its data segment)
            int bbs = (Math.min(ds, Umr.DS_WITH_DATA) * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
            for (int b = 0; b < bbs; b++) {
                if (b > 0) {
                    readBb(sqFetched + b);
                }
                MemorySegment.copy(cur, curOff, umrWqe, (long) b * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
            }
            int opIdx = umrWqe.get(BE32, Qp.CTRL_OPMOD_IDX_OPCODE);
            int qpnDs = umrWqe.get(BE32, Qp.CTRL_QPN_DS);
            int flags = umrWqe.get(ValueLayout.JAVA_BYTE, Umr.CTRL_SEG + Umr.FLAGS) & 0xff;
            int octowords = umrWqe.get(BE16, Umr.CTRL_SEG + Umr.XLT_OCTOWORDS) & 0xffff;
            boolean sized = ds == Umr.DS_WITH_DATA || ds == Umr.DS_NO_DATA && octowords == 0; // a list needs its data segment
            if ((opIdx & 0xff) != Wqe.OP_UMR || qpnDs >>> 8 != hw.qpn || !sized || (flags & UmrWqe.FLAG_INLINE) != 0) {
                return 0;
            }
            UmrWqe u = w.umr == null ? w.umr = new UmrWqe() : w.umr;
            int ctl = umrWqe.get(ValueLayout.JAVA_BYTE, Qp.CTRL_FM_CE_SE) & 0xff;
            w.opcode = Wqe.OP_UMR;
            w.ctrl = (ctl & Qp.CTRL_CQ_UPDATE) != 0 ? Wqe.CTRL_CQ_UPDATE : 0;
            w.numSge = 0;
            w.inlineLen = 0;
            w.length = 0;
            u.mkey = umrWqe.get(BE32, Qp.CTRL_IMM);
            u.flags = flags;
            u.mask = umrWqe.get(BE64, Umr.CTRL_SEG + Umr.MKEY_MASK);
            long m = Umr.MKEY_SEG;
            u.free = Mkey.MKC_FREE.get(umrWqe, m) != 0;
            u.perm = perm(umrWqe, m);
            u.keyByte = Mkey.MKC_MKEY_7_0.get(umrWqe, m);
            u.pdn = Mkey.MKC_PD.get(umrWqe, m);
            u.start = umrWqe.get(BE64, m + Mkey.MKC_START_ADDR);
            u.length = umrWqe.get(BE64, m + Mkey.MKC_LEN);
            u.length64 = Mkey.MKC_LENGTH64.get(umrWqe, m) != 0;
            u.logPageSize = Mkey.MKC_LOG_PAGE_SIZE.get(umrWqe, m);
            u.xltEntries = octowords * Umr.MTT_PER_OCTOWORD;
            long offset = (umrWqe.get(BE16, Umr.CTRL_SEG + Umr.XLT_OFFSET) & 0xffffL)
                    | (umrWqe.get(BE32, Umr.CTRL_SEG + Umr.XLT_OFFSET_47_16) & 0xffff_ffffL) << 16;
            u.xltOffset = (flags & UmrWqe.FLAG_TRANSLATION_OFFSET_EN) != 0 ? offset * Umr.MTT_PER_OCTOWORD : 0;
            if (ds == Umr.DS_WITH_DATA) {
                u.xltByteCount = umrWqe.get(BE32, Umr.DATA_SEG + Qp.DATA_BYTE_COUNT) & 0xffff_ffffL;
                u.xltLkey = umrWqe.get(BE32, Umr.DATA_SEG + Qp.DATA_LKEY);
                u.xltIova = umrWqe.get(BE64, Umr.DATA_SEG + Qp.DATA_ADDR);
            } else {
                u.xltByteCount = 0;
            }
            return (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
        }

        /** Makes the basic block of segment {@code seg} current (a WQE's segments run on across basic blocks). */
        private int segAt(int seg, int bbIndex) {
            int want = sqFetched + seg / 4 & 0xffff;
            if (want != bbIndex) {
                readBb(want);
            }
            return want;
        }

        /**
         * The receive fetch ({@link org.peerdirect.hca.engine.RecvFetcher}): reads the receive
         * doorbell record, then each new WQE's data segments (until the stride ends or an
         * {@code INVALID_LKEY} segment) into the engine's slots from {@code tail}.
         */
        long fetchRecv(RecvQueue q, long head, long tail) {
            int target;
            try {
                target = readDbr(Qp.DBR_RCV) & 0xffff;
            } catch (IommuFault f) {
                dmaFaults.incrementAndGet();
                return tail;
            }
            long t = tail;
            while ((target - rqFetched & 0xffff) != 0 && t - head < q.size()) {
                try {
                    port.read(addr((long) (rqFetched & rqWqes - 1) * rqStride), rwqe, 0, rqStride);
                } catch (IommuFault f) {
                    dmaFaults.incrementAndGet();
                    break;
                }
                dataSegments(rwqe, 0, rqStride, q.slot(t));
                rqCounterOfSlot[(int) t & rqCounterOfSlot.length - 1] = rqFetched & 0xffff;
                rqFetched = rqFetched + 1 & 0xffff;
                t++;
                rqWqesFetched.increment();
            }
            return t;
        }
    }

    /**
     * A receive WQE's data segments from byte {@code from} to {@code end} of {@code wqe} into the
     * engine's slot, up to the first INVALID_LKEY (the list's end) or the slot's capacity.
     */
    private static void dataSegments(MemorySegment wqe, int from, int end, RecvWqe w) {
        w.numSge = 0;
        for (int o = from; o + Qp.DS_SIZE <= end && w.numSge < w.addr.length; o += Qp.DS_SIZE) {
            int lkey = wqe.get(BE32, o + Qp.DATA_LKEY);
            if (lkey == Qp.INVALID_LKEY) {
                break;
            }
            w.byteCount[w.numSge] = wqe.get(BE32, o + Qp.DATA_BYTE_COUNT);
            w.lkey[w.numSge] = lkey;
            w.addr[w.numSge] = wqe.get(BE64, o + Qp.DATA_ADDR);
            w.numSge++;
        }
    }

    // ------------------------------------------------------------------ SRQs

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
        MemCq xcq = null;
        if (xrc) {
            if (!allocations.xrcdAllocated(xrcd)) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "xrcd " + xrcd + " is not allocated");
            }
            xcq = liveCq(Srq.SRQC_CQN.get(in, c));
        } else if (xrcd != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "xrcd " + xrcd + " in CREATE_SRQ: an XRC SRQ is CREATE_XRC_SRQ's");
        }
        if (Srq.SRQC_LOG_PAGE_SIZE.get(in, c) != 0 || Srq.SRQC_PAGE_OFFSET.get(in, c) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, "the model takes SRQ buffers in 4 KiB pages at offset 0");
        }
        int pd = Srq.SRQC_PD.get(in, c);
        if (!allocations.pdAllocated(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        long dbr = in.get(BE64, c + Srq.SRQC_DBR_ADDR);
        if ((dbr & 3) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_SRQ, String.format("dbr_addr 0x%x is not 4-byte aligned", dbr));
        }
        int wqes = 1 << logSize;
        long[] pas = pas(in, Srq.CREATE_SRQ_IN_PAS, srqPages(in), "SRQ");
        FirmwarePages.Slot ctx = context(SRQ_CONTEXT_BYTES, in, c, Srq.SRQC_SIZE);
        HwSrq hw;
        try {
            int sges = Math.max(1, (stride - Srq.NEXT_SEG_SIZE) / Qp.DS_SIZE);
            hw = xrc ? engine.sw2hwXrcSrq(pd, xrcd, xcq.hw, wqes, sges) : engine.sw2hwSrq(pd, wqes, sges);
        } catch (HwCommandException e) {
            pages.free(ctx);
            throw Refused.of(e);
        }
        MemSrq s = new MemSrq(hw, pas, dbr, wqes, stride, ctx, xrc);
        hw.queue().fetcher(s);
        srqs.set(hw.srqn, s);
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
        return s;
    }

    private void readContext(FirmwarePages.Slot slot, MemorySegment out, long at, int size, String what) throws Refused {
        pages.load(slot, out, at, size, what);
    }

    /** {@code QUERY_SRQ}: the context as created, with the armed limit ({@code lwm}, 0 once the event fired). */
    void querySrq(MemorySegment in, MemorySegment out, boolean xrc) throws Refused {
        MemSrq s = liveSrq(Pages.INDEX24.get(in, 0), xrc);
        readContext(s.context, out, Srq.QUERY_SRQ_OUT_SRQC, Srq.SRQC_SIZE, "SRQ");
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
            engine.hw2swSrq(s.hw);
        } catch (HwCommandException e) {
            throw Refused.of(e);
        }
        retire(s);
        srqs.set(srqn, null);
        pages.free(s.context);
    }

    /**
     * An SRQ in host memory: the device walks the WQEs' linked list from index 0 (the list the
     * library built), taking as many as the doorbell record's counter says were posted, and
     * remembers which buffer index each engine slot came from: a receive completion reports that
     * index ({@code wqe_counter}), which the library frees back to its list.
     */
    private final class MemSrq implements org.peerdirect.hca.engine.RecvFetcher {
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
                port.read(dbr + Srq.DBR_COUNTER, word, 0, 4);
            } catch (IommuFault f) {
                dmaFaults.incrementAndGet();
                return 0;
            }
            return Math.max(0, word.get(BE32, 0) - taken);
        }

        /** The counter in the doorbell record, then WQEs down the list. */
        @Override
        public long fetch(RecvQueue q, long head, long tail) {
            int posted;
            try {
                port.read(dbr + Srq.DBR_COUNTER, word, 0, 4);
                posted = word.get(BE32, 0);
            } catch (IommuFault f) {
                dmaFaults.incrementAndGet();
                return tail;
            }
            long t = tail;
            while (posted - taken > 0 && t - head < q.size()) {
                long off = (long) (next & wqes - 1) * stride;
                try {
                    port.read(pas[(int) (off >>> 12)] + (off & 0xfff), wqe, 0, stride);
                } catch (IommuFault f) {
                    dmaFaults.incrementAndGet();
                    break;
                }
                dataSegments(wqe, Srq.NEXT_SEG_SIZE, stride, q.slot(t));
                indexOfSlot[(int) t & indexOfSlot.length - 1] = next & wqes - 1;
                next = wqe.get(BE16, Srq.NEXT_WQE_INDEX) & 0xffff;
                taken++;
                t++;
                wqesFetched.increment(); // under the queue's consumer lock
            }
            return t;
        }
    }

    // ------------------------------------------------------------------ mkeys

    /** The MTT entries a CREATE_MKEY carries: translations_octword_actual_size × 2. */
    static int mttEntries(MemorySegment in) {
        return (int) Math.min(1 << 20, 2L * (in.get(BE32, Mkey.CREATE_IN_OCTWORD_ACTUAL_SIZE) & 0xffff_ffffL));
    }

    /** The {@link HcaDevice}{@code .PERM_*} rights of an mkey context's access bits at {@code m}. */
    static int perm(MemorySegment s, long m) {
        return (Mkey.MKC_LR.get(s, m) != 0 ? HcaDevice.PERM_LOCAL_READ : 0) | (Mkey.MKC_LW.get(s, m) != 0 ? HcaDevice.PERM_LOCAL_WRITE : 0)
                | (Mkey.MKC_RR.get(s, m) != 0 ? HcaDevice.PERM_REMOTE_READ : 0) | (Mkey.MKC_RW.get(s, m) != 0 ? HcaDevice.PERM_REMOTE_WRITE : 0)
                | (Mkey.MKC_A.get(s, m) != 0 ? HcaDevice.PERM_ATOMIC : 0)
                | (Mkey.MKC_FLUSH_GLOBAL.get(s, m) != 0 ? HcaDevice.PERM_FLUSH_GLOBAL : 0)
                | (Mkey.MKC_FLUSH_PERSISTENT.get(s, m) != 0 ? HcaDevice.PERM_FLUSH_PERSISTENT : 0);
    }

    /** The most MTT entries one UMR-enabled mkey may be created with (2^30, a 4 TiB range of 4 KiB pages; the entries are kept in chunks made when first written, so the size costs 8 bytes per 4096 entries until used). */
    static final int MAX_UMR_MTT = 1 << 30;

    void createMkey(MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        long m = Mkey.CREATE_IN_MKC;
        int mode = Mkey.MKC_ACCESS_MODE_1_0.get(in, m) | Mkey.MKC_ACCESS_MODE_4_2.get(in, m) << 2;
        if (mode != Mkey.ACCESS_MODE_MTT && mode != Mkey.ACCESS_MODE_KSM) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "access mode " + mode + ": the model builds MTT (1) and KSM (3) mkeys; "
                    + "PA, KLM and the others are not built");
        }
        if (Mkey.MKC_UMR_EN.get(in, m) != 0) {
            createUmrMkey(in, out, mode == Mkey.ACCESS_MODE_KSM);
            return;
        }
        if (mode == Mkey.ACCESS_MODE_KSM) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "a KSM mkey is built with umr_en only (its entries are written by UMR)");
        }
        if (Mkey.MKC_FREE.get(in, m) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "a free mkey can only be enabled by UMR: it needs umr_en");
        }
        if (Mkey.MKC_LOG_PAGE_SIZE.get(in, m) != 12) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "log_page_size " + Mkey.MKC_LOG_PAGE_SIZE.get(in, m)
                    + ": the model translates 4 KiB pages");
        }
        int pd = Mkey.MKC_PD.get(in, m);
        if (!allocations.pdAllocated(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        long start = in.get(BE64, m + Mkey.MKC_START_ADDR);
        long len = in.get(BE64, m + Mkey.MKC_LEN);
        if (len <= 0 || start + len < start) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, String.format("mkey of %d bytes at 0x%x", len, start));
        }
        long pages = ((start & 0xfff) + len + 4095) >>> 12;
        int n = mttEntries(in);
        if (n < pages) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "the MTT has " + n + " entries for " + pages + " pages");
        }
        long[] iova = new long[(int) pages];
        long[] length = new long[(int) pages];
        for (int i = 0; i < pages; i++) {
            long e = in.get(BE64, Mkey.CREATE_IN_MTT + 8L * i);
            if ((e & Mkey.MTT_READ) == 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "MTT entry " + i + " is not present (rd_en clear)");
            }
            iova[i] = e & ~0xfffL;
            length[i] = 4096;
        }
        int perm = perm(in, m);
        FirmwarePages.Slot ctx = context(MKEY_CONTEXT_BYTES, in, m, 64);
        int key;
        try {
            key = engine.sw2hwMpt(pd, start, len, perm, iova, length, Mkey.MKC_MKEY_7_0.get(in, m));
        } catch (HwCommandException e) {
            this.pages.free(ctx);
            throw Refused.of(e);
        }
        mkeys.put(Mkey.mkeyToIdx(key), ctx);
        Pages.INDEX24.set(out, 0, Mkey.mkeyToIdx(key));
    }

    /**
     * {@code CREATE_MKEY} with {@code umr_en}: an MTT mkey with {@code translations_octword_size} × 2
     * entries, the first {@code translations_octword_actual_size} × 2 given (an entry without
     * {@code rd_en} is not present), created free or in use; UMR work requests change it later.
     */
    private void createUmrMkey(MemorySegment in, MemorySegment out, boolean ksm) throws Refused, CommandQueue.Deferred {
        long m = Mkey.CREATE_IN_MKC;
        // an octoword holds two MTT entries or one KSM entry
        long capacity = (ksm ? 1L : 2L) * (Mkey.MKC_TRANSLATIONS_OCTWORD_SIZE.get(in, m) & 0xffff_ffffL);
        int n = ksm ? mttEntries(in) / 2 : mttEntries(in);
        if (capacity < 1 || capacity > MAX_UMR_MTT || n > capacity) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, String.format(
                    "translations_octword_size %d (%d %s entries, the model takes 1..%d) with %d entries given", capacity / (ksm ? 1 : 2), capacity,
                    ksm ? "KSM" : "MTT", MAX_UMR_MTT, n));
        }
        if (ksm && n > 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "a KSM mkey is created without entries (" + n
                    + " given): UMR writes them");
        }
        int pd = Mkey.MKC_PD.get(in, m);
        if (!allocations.pdAllocated(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        long[] mtt = new long[ksm ? 0 : n];
        for (int i = 0; i < mtt.length; i++) {
            long e = in.get(BE64, Mkey.CREATE_IN_MTT + 8L * i);
            mtt[i] = (e & Mkey.MTT_READ) == 0 ? 0 : e;
        }
        FirmwarePages.Slot ctx = context(MKEY_CONTEXT_BYTES, in, m, 64);
        int key;
        try {
            long len = Mkey.MKC_LENGTH64.get(in, m) != 0 ? Long.MAX_VALUE - in.get(BE64, m + Mkey.MKC_START_ADDR) : in.get(BE64, m + Mkey.MKC_LEN);
            key = engine.createUmrMpt(pd, in.get(BE64, m + Mkey.MKC_START_ADDR), len, perm(in, m), Mkey.MKC_LOG_PAGE_SIZE.get(in, m), (int) capacity,
                    Mkey.MKC_FREE.get(in, m) != 0, mtt, ksm ? 0 : n, Mkey.MKC_MKEY_7_0.get(in, m), ksm);
        } catch (HwCommandException e) {
            pages.free(ctx);
            throw Refused.of(e);
        }
        mkeys.put(Mkey.mkeyToIdx(key), ctx);
        Pages.INDEX24.set(out, 0, Mkey.mkeyToIdx(key));
    }

    void destroyMkey(MemorySegment in) throws Refused {
        int index = Pages.INDEX24.get(in, 0);
        FirmwarePages.Slot ctx = mkeys.remove(index);
        if (ctx == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "mkey index 0x" + Integer.toHexString(index) + " does not exist");
        }
        int key = engine.mptKeyOfIndex(index);
        engine.hw2swMpt(key); // revoked: returns when no DMA through it is in flight
        engine.freeMpt(key);
        pages.free(ctx);
    }

    /**
     * The {@code wqe_index} a WQE page fault reports: the engine's slot as the driver counts WQEs
     * (the send queue's basic-block counter, the receive queue's WQE counter, the SRQ's buffer
     * index); 0 for an RDMA fault or a queue gone meanwhile.
     */
    int faultWqeIndex(org.peerdirect.hca.engine.PageFault f) {
        if (f.wqeIndex() < 0) {
            return 0;
        }
        if ((f.flags() & org.peerdirect.hca.engine.PageFault.FLAG_SRQ) != 0) {
            MemSrq s = f.wqNum() >= 0 && f.wqNum() < srqs.length() ? srqs.get(f.wqNum()) : null;
            return s == null ? 0 : s.wqeIndex(f.wqeIndex());
        }
        MemQp q = f.wqNum() >= 0 && f.wqNum() < qps.length() ? qps.get(f.wqNum()) : null;
        if (q == null) {
            return 0;
        }
        return f.requestor() ? q.sqWqeCounter(f.wqeIndex()) : q.rqWqeCounter(f.wqeIndex());
    }

    /** What the model shows tools. */
    String describe() {
        return String.format("CQs %d, QPs %d, mkeys %d, WQEs fetched %d (by BlueFlame %d), CQEs written %d, bad WQEs %d, DMA faults %d", cqCount(), qpCount(),
                mkeyCount(), wqesFetched(), wqesBlueFlame(), cqesWritten(), badWqes.get(), dmaFaults.get());
    }
}
