package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One event queue as the hardware keeps it: the ring of 64-byte EQEs in the driver's memory
 * (described by the page list given at {@code CREATE_EQ}), the producer counter, the consumer
 * counter the driver reports through its UAR doorbell, and the interrupt state machine: an armed
 * EQ raises its MSI-X vector on the next EQE and becomes fired; only a doorbell with arm makes it
 * armed again, and it fires at once if EQEs are already waiting.
 *
 * <p>Lock rules: the firmware thread posts, the driver's thread rings doorbells (the BAR write
 * handler); both under this object's monitor. The MSI-X raise happens after the monitor is left.
 */
final class HwEq {

    final int eqn;
    final int logSize;
    /** The ring's 4 KiB pages (the model takes {@code log_page_size} 0 only). */
    final long[] pas;
    final int uarPage;
    final int intr;
    final long eventMask;
    final FirmwarePages.Slot context;
    private final MemorySegment eqe = MemorySegment.ofArray(new byte[Eq.EQE_SIZE]);
    // guarded by this
    private int producer;
    private int consumer;
    private int st = Eq.ST_FIRED;
    private long overruns;
    private long dmaFaults;

    HwEq(int eqn, int logSize, long[] pas, int uarPage, int intr, long eventMask, FirmwarePages.Slot context) {
        this.eqn = eqn;
        this.logSize = logSize;
        this.pas = pas;
        this.uarPage = uarPage;
        this.intr = intr;
        this.eventMask = eventMask;
        this.context = context;
    }

    boolean wants(int eventType) {
        return eventType < 64 && (eventMask >>> eventType & 1) != 0;
    }

    private long entryAddress(int index) {
        long off = (long) (index & (1 << logSize) - 1) * Eq.EQE_SIZE;
        return pas[(int) (off >>> 12)] + (off & 4095);
    }

    /**
     * Writes one EQE (type, subtype and the 28 data bytes from {@code data}) with the owner bit of
     * this pass over the ring: the body first, the owner byte last, as the hardware orders them.
     * A full ring drops the event and counts an overrun.
     *
     * @return whether the EQ's vector must be raised; a dropped event is also false, see
     *         {@link #postOrDrop} for the difference
     */
    synchronized boolean post(DmaPort port, int type, int subType, MemorySegment data) {
        return postOrDrop(port, type, subType, data) == RAISE;
    }

    /** {@link #postOrDrop}: the event was lost (ring full, or its memory no longer mapped). */
    static final int DROPPED = 0;
    /** Written; the EQ was not armed, so no interrupt. */
    static final int WRITTEN = 1;
    /** Written, and the EQ's vector must be raised. */
    static final int RAISE = 2;

    /** Posts one EQE: {@link #DROPPED}, {@link #WRITTEN} or {@link #RAISE}. */
    synchronized int postOrDrop(DmaPort port, int type, int subType, MemorySegment data) {
        if (producer - consumer >= 1 << logSize) {
            overruns++;
            return DROPPED;
        }
        eqe.fill((byte) 0);
        eqe.set(ValueLayout.JAVA_BYTE, Eq.EQE_TYPE, (byte) type);
        eqe.set(ValueLayout.JAVA_BYTE, Eq.EQE_SUB_TYPE, (byte) subType);
        if (data != null) {
            MemorySegment.copy(data, 0, eqe, Eq.EQE_DATA, Math.min(28, data.byteSize()));
        }
        eqe.set(ValueLayout.JAVA_BYTE, Eq.EQE_OWNER, (byte) (producer >>> logSize & 1));
        long at = entryAddress(producer);
        try {
            port.writeDescriptor(at, eqe, 0, Eq.EQE_SIZE); // the word with the owner byte last
        } catch (IommuFault f) {
            dmaFaults++; // the driver unmapped its ring under a live EQ: the IOMMU stopped it
            return DROPPED;
        }
        producer++;
        if (st == Eq.ST_ARMED) {
            st = Eq.ST_FIRED;
            return RAISE;
        }
        return WRITTEN;
    }

    /**
     * The UAR doorbell: the consumer index (24 bits) and, with {@code arm}, the arming.
     *
     * @return whether the vector must be raised (armed with EQEs already waiting)
     */
    synchronized boolean doorbell(int ci, boolean arm) {
        consumer = producer - (producer - ci & 0xff_ffff);
        if (!arm) {
            return false;
        }
        if (producer != consumer) {
            st = Eq.ST_FIRED;
            return true;
        }
        st = Eq.ST_ARMED;
        return false;
    }

    synchronized int producer() {
        return producer;
    }

    synchronized int consumer() {
        return consumer;
    }

    synchronized int state() {
        return st;
    }

    synchronized long overruns() {
        return overruns;
    }

    synchronized long dmaFaults() {
        return dmaFaults;
    }

    /** Raises the vector (outside the monitor). */
    void raise(PciFunction fn) {
        fn.raiseMsix(intr);
    }
}
