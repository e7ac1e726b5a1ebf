package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.peerdirect.hca.cx3.ifc.Cqe;
import org.peerdirect.hca.engine.CqeSink;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * A CQ's ring in the driver's memory as the ConnectX-3 writes it: the engine's CQ writer hands
 * each completion here ({@link CqeSink}), and it becomes a 32-byte {@code struct mlx4_cqe} (or
 * {@code mlx4_err_cqe}) written by DMA into the page the MTT names for its slot, the owner byte
 * last with the owner bit of the CQE's pass over the ring. The overrun check reads the consumer
 * index the driver keeps in the CQ's doorbell record ({@code set_ci}).
 *
 * <p>Lock rules: {@link #write} and {@link #consumerIndex} run under the engine CQ's producer lock
 * (one writer at a time), so the scratch segments are confined to it.
 */
final class CqRing implements CqeSink {

    final int logSize;
    private final long[] pages;
    private final long dbRec;
    private final DmaPort port;
    /** A completion's {@code wqe_index} as the driver counts it (an SRQ's buffer index for a receive from one). */
    private final java.util.function.ToIntFunction<org.peerdirect.hca.engine.Cqe> wqeIndex;
    /** The engine's CQ, set once SW2HW_CQ created it (read for the producer index when the record is unreadable). */
    volatile HwCq hw;
    private final MemorySegment cqe = MemorySegment.ofArray(new byte[Cqe.SIZE]);
    private final MemorySegment ci = MemorySegment.ofArray(new byte[4]);
    /** CQEs written, and DMA writes or reads the IOMMU refused (the driver unmapped its ring or record under a live CQ): the device's counts over all CQs. */
    private final LongAdder written;
    private final AtomicLong dmaFaults;

    CqRing(int logSize, long[] pages, long dbRec, DmaPort port, java.util.function.ToIntFunction<org.peerdirect.hca.engine.Cqe> wqeIndex,
            LongAdder written, AtomicLong dmaFaults) {
        this.logSize = logSize;
        this.wqeIndex = wqeIndex;
        this.pages = pages;
        this.dbRec = dbRec;
        this.port = port;
        this.written = written;
        this.dmaFaults = dmaFaults;
    }

    @Override
    public void write(long index, org.peerdirect.hca.engine.Cqe c) {
        cqe.fill((byte) 0);
        int opcode;
        cqe.set(BE16, Cqe.WQE_INDEX, (short) wqeIndex.applyAsInt(c));
        cqe.set(BE32, Cqe.VLAN_MY_QPN, c.qpn & Cqe.QPN_MASK);
        if (c.opcode == org.peerdirect.hca.engine.Cqe.OPCODE_ERROR) {
            opcode = Cqe.OPCODE_ERROR; // the engine's syndromes are mlx4's (MLX4_CQE_SYNDROME_*)
            cqe.set(U8, Cqe.SYNDROME, (byte) c.syndrome);
            cqe.set(U8, Cqe.VENDOR_ERR_SYNDROME, (byte) c.vendorSyndrome);
        } else {
            opcode = c.opcode & Cqe.OPCODE_MASK; // a send WQE's MLX4_OPCODE_*, or MLX4_RECV_OPCODE_*
            cqe.set(BE32, Cqe.BYTE_CNT, c.byteCnt);
            if (!c.isSend) {
                cqe.set(BE32, Cqe.IMMED_RSS_INVALID, c.imm);
                cqe.set(BE32, Cqe.G_MLPATH_RQPN,
                        ((c.flags & org.peerdirect.hca.engine.Cqe.FLAG_GRH) != 0 ? Cqe.G_BIT : 0) | c.srcQp & Cqe.QPN_MASK);
                cqe.set(BE16, Cqe.RLID, (short) c.slid);
            }
        }
        int owner = (index >>> logSize & 1) != 0 ? Cqe.OWNER_MASK : 0;
        cqe.set(U8, Cqe.OWNER_SR_OPCODE, (byte) (owner | (c.isSend ? Cqe.IS_SEND_MASK : 0) | opcode));
        long off = (index & (1L << logSize) - 1) * Cqe.SIZE;
        try {
            port.writeDescriptor(pages[(int) (off >>> 12)] + (off & 0xfff), cqe, 0, Cqe.SIZE); // the owner byte last
            written.increment();
        } catch (IommuFault f) {
            dmaFaults.incrementAndGet();
        }
    }

    @Override
    public long consumerIndex() {
        try {
            port.read(dbRec + Cqe.DB_SET_CI, ci, 0, 4);
        } catch (IommuFault f) {
            dmaFaults.incrementAndGet();
            return hw.producerIndex() - (1L << logSize); // unreadable: the ring counts as full
        }
        return ci.get(BE32, 0) & 0xff_ffff;
    }
}
