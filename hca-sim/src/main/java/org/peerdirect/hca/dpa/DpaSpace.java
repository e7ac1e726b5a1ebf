package org.peerdirect.hca.dpa;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * DPA memory as the NIC's DMA engine reaches it: device-local, not behind the host IOMMU (the
 * host audit never sees these bytes), checked by the memory model instead. Addresses are DPA
 * addresses; every access must lie in one allocated region (DPA_MEM or a process's memory), else
 * it is refused as an IOMMU {@code NOT_MAPPED} fault of this space, so the engine's error paths
 * (remote access error, local protection error) apply unchanged.
 *
 * <p>The NIC-side rules of the memory model (DPA_MODEL.md §1.5): NIC → DPA writes are coherent and
 * supersede buffered stores; NIC reads see what the EUs wrote back (C1 otherwise); atomics are
 * performed at memory.
 */
final class DpaSpace implements DmaPort {

    private final DpaUnit unit;
    /** Doorbell records the NIC polls ({@link DpaUnit#recordSpace}): reads without the C1 report. */
    private final boolean records;

    DpaSpace(DpaUnit unit, boolean records) {
        this.unit = unit;
        this.records = records;
    }

    @Override
    public String name() {
        return "dpa-memory";
    }

    private void check(long daddr, long len) {
        if (len < 0 || unit.memory.regionOf(daddr, len) == null) {
            throw new IommuFault(IommuFault.Kind.NOT_MAPPED, name(), daddr, "DPA memory 0x" + Long.toHexString(daddr) + "+" + len
                    + " is not allocated");
        }
    }

    /**
     * The unit closes its memory at the function's removal after every EU stopped but possibly
     * while the engine still finishes a transfer (it is reset right after): such an access is
     * refused as a fault of this space, not thrown as the closed arena's error.
     */
    private IommuFault gone(long daddr) {
        return new IommuFault(IommuFault.Kind.NOT_MAPPED, name(), daddr, "the DPA unit was closed");
    }

    @Override
    public void read(long iova, MemorySegment dst, long dstOffset, long len) {
        check(iova, len);
        try {
            if (records) {
                unit.mm.nicPoll(iova, dst, dstOffset, len);
            } else {
                unit.mm.nicRead(iova, dst, dstOffset, len, "bytes the NIC fetched (a WQE, send data, an RDMA READ)");
            }
        } catch (IllegalStateException e) {
            throw gone(iova);
        }
    }

    @Override
    public void write(long iova, MemorySegment src, long srcOffset, long len) {
        check(iova, len);
        try {
            unit.mm.nicWrite(iova, src, srcOffset, len);
        } catch (IllegalStateException e) {
            throw gone(iova);
        }
    }

    @Override
    public void copyTo(long srcIova, DmaPort dst, long dstIova, long len) {
        check(srcIova, len);
        MemorySegment buf = MemorySegment.ofArray(new byte[Math.toIntExact(len)]);
        read(srcIova, buf, 0, len);
        dst.write(dstIova, buf, 0, len);
    }

    private void checkAtomic(long iova) {
        if ((iova & 7) != 0) {
            throw new IommuFault(IommuFault.Kind.PERMISSION, name(), iova, "an atomic at an unaligned DPA address");
        }
        check(iova, 8);
    }

    @Override
    public long fetchAdd(long iova, long delta) {
        checkAtomic(iova);
        return atomic(iova, v -> v + delta);
    }

    @Override
    public long compareAndSwap(long iova, long expect, long update) {
        checkAtomic(iova);
        return atomic(iova, v -> v == expect ? update : v);
    }

    @Override
    public void atomicWrite(long iova, long value) {
        checkAtomic(iova);
        atomic(iova, v -> value);
    }

    private long atomic(long iova, java.util.function.LongUnaryOperator op) {
        try {
            return unit.mm.nicAtomic(iova, op);
        } catch (IllegalStateException e) {
            throw gone(iova);
        }
    }

    /** The last 8-byte word last: a DPA thread polling it (a CQE's op_own) sees the rest (NIC → DPA is coherent and ordered). */
    @Override
    public void writeDescriptor(long iova, MemorySegment src, long srcOffset, int len) {
        if ((iova & 7) != 0 || len < 8 || (len & 7) != 0) {
            throw new IllegalArgumentException("descriptor of " + len + " bytes at DPA address 0x" + Long.toHexString(iova));
        }
        write(iova, src, srcOffset, len - 8);
        java.lang.invoke.VarHandle.releaseFence();
        write(iova + len - 8, src, srcOffset + len - 8, 8);
    }

    /** DPA memory holds nothing volatile behind the NIC: a flushing read checks the range only. */
    @Override
    public void flush(long iova, long len) {
        check(iova, len);
    }
}
