package org.peerdirect.hca.cx3.fw;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx3.ifc.Eqe;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * One event queue as the ConnectX-3 keeps it: a ring of 32-byte EQEs in the driver's pages (the
 * MTT named by the EQ context at {@code SW2HW_EQ}), the producer counter, the consumer counter the
 * driver writes to the EQ's UAR doorbell, and the arming: an armed EQ raises its MSI-X vector on
 * the next EQE and is fired; only a doorbell with {@code req_not} arms it again, and it fires at
 * once when EQEs are waiting.
 *
 * <p>Lock rules: posts (any engine or firmware thread) and doorbells (the driver's thread, from
 * the BAR write handler) under this object's monitor; the MSI-X raise after the monitor is left.
 */
final class HwEq {

    final int eqn;
    final int logSize;
    final long[] pages;
    final int intr;
    /** The event types {@code MAP_EQ} routed here (bit per type); guarded by this. */
    private long eventMask;
    private final MemorySegment eqe = MemorySegment.ofArray(new byte[Eqe.SIZE]);
    // guarded by this
    private int producer;
    private int consumer;
    private boolean armed;
    private boolean dead;
    private long overruns;
    private long dmaFaults;

    HwEq(int eqn, int logSize, long[] pages, int intr) {
        this.eqn = eqn;
        this.logSize = logSize;
        this.pages = pages;
        this.intr = intr;
    }

    synchronized void map(long mask, boolean unmap) {
        eventMask = unmap ? eventMask & ~mask : eventMask | mask;
    }

    synchronized boolean wants(int type) {
        return type < 64 && (eventMask >>> type & 1) != 0;
    }

    synchronized long eventMask() {
        return eventMask;
    }

    private long entryAddress(int index) {
        long off = (long) (index & (1 << logSize) - 1) * Eqe.SIZE;
        return pages[(int) (off >>> 12)] + (off & 4095);
    }

    /**
     * Writes one EQE (type, subtype, up to 24 data bytes) with the owner bit of this pass over the
     * ring, the owner byte last. A full ring, a dead EQ or a ring the IOMMU refuses drops it.
     *
     * @return whether the EQ's vector must be raised
     */
    synchronized boolean post(DmaPort port, int type, int subType, MemorySegment data) {
        if (dead) {
            return false;
        }
        if (producer - consumer >= 1 << logSize) {
            overruns++;
            return false;
        }
        eqe.fill((byte) 0);
        eqe.set(ValueLayout.JAVA_BYTE, Eqe.TYPE, (byte) type);
        eqe.set(ValueLayout.JAVA_BYTE, Eqe.SUBTYPE, (byte) subType);
        if (data != null) {
            MemorySegment.copy(data, 0, eqe, Eqe.DATA, Math.min(Eqe.DATA_SIZE, data.byteSize()));
        }
        eqe.set(ValueLayout.JAVA_BYTE, Eqe.OWNER, (byte) ((producer >>> logSize & 1) != 0 ? Eqe.OWNER_BIT : 0));
        try {
            port.writeDescriptor(entryAddress(producer), eqe, 0, Eqe.SIZE);
        } catch (IommuFault f) {
            dmaFaults++; // the driver unmapped its ring under a live EQ: the IOMMU stopped it
            return false;
        }
        producer++;
        if (armed) {
            armed = false;
            return true;
        }
        return false;
    }

    /** The doorbell: the consumer index (24 bits) and the arming; true when the vector must be raised now. */
    synchronized boolean doorbell(int ci, boolean reqNot) {
        if (dead) {
            return false;
        }
        int lag = producer - ci & 0xff_ffff;
        if (lag <= 1 << logSize) {
            consumer = producer - lag; // a consumer index past the producer or a ring behind is ignored
        }
        if (!reqNot) {
            return false;
        }
        if (producer != consumer) {
            return true;
        }
        armed = true;
        return false;
    }

    /** HW2SW_EQ or a reset: nothing is written to the ring any more. */
    synchronized void kill() {
        dead = true;
        eventMask = 0;
    }

    synchronized int producer() {
        return producer;
    }

    synchronized int consumer() {
        return consumer;
    }

    synchronized boolean armed() {
        return armed;
    }

    synchronized long overruns() {
        return overruns;
    }

    synchronized long dmaFaults() {
        return dmaFaults;
    }
}
