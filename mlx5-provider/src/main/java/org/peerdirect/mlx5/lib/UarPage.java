package org.peerdirect.mlx5.lib;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.pci.PciFunction;

/**
 * The user context's UAR page as the library has it mapped ({@code mmap} of the UAR through the
 * device file): 64-bit MMIO writes at an offset inside the one 4 KiB page of BAR0, nothing else of
 * the function.
 */
public final class UarPage {

    public final int index;
    private final PciFunction fn;
    private final long base;

    public UarPage(PciFunction fn, int index) {
        this.fn = fn;
        this.index = index;
        this.base = (long) index << 12;
    }

    /** A 64-bit write of {@code value}'s bytes (in memory order) at {@code off} of the page. */
    void write64(long off, long value) {
        if (off < 0 || off > 4088 || (off & 7) != 0) {
            throw new IllegalArgumentException("UAR offset 0x" + Long.toHexString(off) + " is outside the page or unaligned");
        }
        fn.write64(0, base + off, value);
    }

    /** A write-combined burst of {@code length} bytes of {@code src} from {@code srcOffset} at {@code off} of the page (a BlueFlame copy). */
    void burst(long off, MemorySegment src, long srcOffset, int length) {
        if (off < 0 || off + length > 4096 || (off & 7) != 0) {
            throw new IllegalArgumentException("UAR offset 0x" + Long.toHexString(off) + ": a " + length + "-byte burst leaves the page or is unaligned");
        }
        fn.iowrite64Copy(0, base + off, src, srcOffset, length);
    }
}
