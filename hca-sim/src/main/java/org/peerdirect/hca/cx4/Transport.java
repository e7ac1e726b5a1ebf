package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.hca.engine.AsyncEventHandler;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.PageFault;
import org.peerdirect.kernel.dma.DmaPort;

/**
 * The ConnectX-4+ data path: CQs ({@link Cqs}), QPs ({@link Qps}, their queues in memory
 * {@link MemQp}, a {@code pas} list or a DevX umem: {@link QueueMemory}), SRQs ({@link Srqs}) and
 * mkeys ({@link Mkeys}) created by commands, with the
 * shared transport engine ({@link HcaDevice}) behind descriptors in host memory, and the engine's
 * events as EQEs. The firmware side (commands) runs on the firmware thread; the doorbell side on
 * the thread that wrote the UAR, as the hardware's doorbell processing starts with the PCIe write.
 * Contexts live in the firmware's pages (CQ 256 B, QP 512 B, SRQ 128 B, mkey 64 B), written
 * there by DMA: a command that finds none free is parked for a page request, like {@code CREATE_EQ}.
 *
 * <p>Counters: each live queue keeps its own {@link Tally} (WQEs fetched, of those carried by
 * BlueFlame, CQEs written), so the data path of one queue shares no counter with another's; a
 * queue's counts move to its table's retired total when the queue leaves its table (firmware
 * thread), just before, so a total read at that instant may count it twice. A doorbell that races
 * the destroy of its QP after that (the QP already in ERR, its WQEs flushing) goes uncounted.
 *
 * <p>Lock rules: see each table; this class keeps no state of its own but the tables.
 */
final class Transport {

    final DataPath dp;
    final Cqs cqs;
    final Qps qps;
    final Srqs srqs;
    final Mkeys mkeys;
    private final Eqs eqs;

    Transport(HcaDevice engine, DmaPort port, Eqs eqs, Allocations allocations, Caps caps, FirmwarePages pages, Umems umems) {
        this.dp = new DataPath(engine, port);
        this.eqs = eqs;
        // a CQE's wqe_counter is the QP's or SRQ's count of the WQE: asked of the QPs, built after the CQs they complete to
        this.cqs = new Cqs(dp, eqs, allocations, caps, pages, umems, this::cqeWqeCounter);
        this.srqs = new Srqs(dp, allocations, caps, pages, cqs);
        this.qps = new Qps(dp, allocations, caps, pages, umems, cqs, srqs);
        this.mkeys = new Mkeys(dp, allocations, pages, umems);
        engine.setEventHandler(cqs::event);
        engine.setAsyncEventHandler(new AsyncEventHandler() {
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

    /** The data-path commands, each table's own. */
    void register(CommandTable t) {
        cqs.register(t);
        qps.register(t);
        srqs.register(t);
        mkeys.register(t);
    }

    /**
     * The engine's affiliated events of QPs and SRQs: an EQE on the EQ that asked for the type
     * ({@code struct mlx5_eqe_qp_srq}: the queue type and number); dropped when no EQ asked.
     */
    private void asyncEvent(int type, int number) {
        MemorySegment d = MemorySegment.ofArray(new byte[28]);
        boolean srq = type == AsyncEventHandler.SRQ_LIMIT;
        d.set(ValueLayout.JAVA_BYTE, Srq.EQE_QP_SRQ_TYPE, (byte) (srq ? Srq.EVENT_QUEUE_TYPE_RQ : Srq.EVENT_QUEUE_TYPE_QP));
        d.set(BE32, Srq.EQE_QP_SRQ_N, number & 0xff_ffff);
        eqs.postEvent(type, 0, d);
    }

    private int cqeWqeCounter(Cqe c) {
        return qps.cqeWqeCounter(c);
    }

    /** The {@code wqe_index} a WQE page fault reports (see {@link Qps#faultWqeIndex}). */
    int faultWqeIndex(PageFault f) {
        return qps.faultWqeIndex(f);
    }

    int cqCount() {
        return cqs.count();
    }

    int qpCount() {
        return qps.count();
    }

    int srqCount() {
        return srqs.count();
    }

    int mkeyCount() {
        return mkeys.count();
    }

    /** WQEs fetched from host memory or taken from a BlueFlame write, by every queue so far. */
    long wqesFetched() {
        return qps.wqesFetched() + srqs.wqesFetched();
    }

    /** Of those, the send WQEs a BlueFlame write carried, which the device did not read by DMA. */
    long wqesBlueFlame() {
        return qps.wqesBlueFlame();
    }

    long cqesWritten() {
        return cqs.cqesWritten();
    }

    /** Objects that keep a graceful teardown from going. */
    int live() {
        return cqCount() + qpCount() + mkeyCount() + srqCount();
    }

    /** Force close: every object dropped (QPs flushed and freed, keys revoked), the contexts' pages freed with the rest. */
    void dropAll() {
        dp.engine.reset();
        cqs.dropAll();
        qps.dropAll();
        srqs.dropAll();
        mkeys.dropAll();
    }

    /** What the model shows tools. */
    String describe() {
        return String.format("CQs %d, QPs %d, mkeys %d, WQEs fetched %d (by BlueFlame %d), CQEs written %d, bad WQEs %d, bad doorbells %d,"
                + " DMA faults %d", cqCount(), qpCount(), mkeyCount(), wqesFetched(), wqesBlueFlame(), cqesWritten(), dp.badWqes.get(),
                dp.badDoorbells.get(), dp.dmaFaults.get());
    }
}
