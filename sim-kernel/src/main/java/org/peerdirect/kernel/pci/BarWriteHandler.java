package org.peerdirect.kernel.pci;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * A device model's view of driver writes to one of its BARs, the way hardware sees a doorbell:
 * called synchronously on the driver's thread after the written bytes are visible in
 * {@link PciFunction#barMemory(int)}. While it runs the BAR memory stays valid even if the
 * function is removed concurrently.
 *
 * <p>A PCIe write is posted: the driver never learns what the device did with it. An exception
 * thrown here is therefore logged by the bus and not passed back to the driver.
 */
@ConsumerType
@FunctionalInterface
public interface BarWriteHandler {

    /**
     * @param bar the BAR index (0..5)
     * @param offset byte offset of the write inside the BAR
     * @param width 4 or 8 bytes
     * @param value the value the driver wrote (zero-extended for width 4), whatever byte order it
     *        was stored in ({@code write32be} stores it big-endian)
     */
    void written(int bar, long offset, int width, long value);

    /**
     * A write-combined burst ({@link PciFunction#iowrite64Copy}): {@code length} bytes of
     * {@code payload} from {@code payloadOffset} are the bytes as the TLP carried them, valid and
     * unchanged only during the call (read them, never keep the segment);
     * they are already in {@link PciFunction#barMemory(int)} too, where a later write may replace
     * them. A device without write-combining support sees the burst as the 64-bit writes it is
     * made of, in order: the default.
     */
    default void writtenBurst(int bar, long offset, java.lang.foreign.MemorySegment payload, long payloadOffset, int length) {
        for (int i = 0; i < length; i += 8) {
            written(bar, offset + i, 8, payload.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, payloadOffset + i));
        }
    }
}
