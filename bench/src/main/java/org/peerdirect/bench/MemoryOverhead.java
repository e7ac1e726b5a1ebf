package org.peerdirect.bench;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * Java heap per resident 4 KiB page of simulated memory, and for untouched address space:
 * {@code ./peerdirect bench --overhead}. Heap is read after full GCs before and after touching
 * every page of a 512 MiB mapping; the frame table is off-heap and reported apart.
 */
public final class MemoryOverhead {

    private MemoryOverhead() {
    }

    static long heapUsed() throws InterruptedException {
        long last = Long.MAX_VALUE;
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(50); // measurement tool, not a test: lets the collector settle between reads
            long used = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
            if (Math.abs(used - last) < 64 * 1024) {
                return used;
            }
            last = used;
        }
        return last;
    }

    public static void main(String[] args) throws Exception {
        long bytes = 512L << 20;
        long pages = bytes / 4096;
        Path swap = Files.createTempFile("pd-overhead-swap", "");
        try (Mm mm = new Mm(bytes + (64L << 20), false, swap, 16L << 20)) {
            AddressSpace as = mm.createProcess("overhead");
            long h0 = heapUsed();
            long huge = as.mmap(0, 64L << 40, 3, org.peerdirect.kernel.mm.Vma.Kind.ANON, "untouched-64TiB");
            long h1 = heapUsed();
            long a = as.mmap(bytes);
            as.populate(a, bytes, true);
            long h2 = heapUsed();
            System.out.printf(Locale.ROOT, "untouched 64 TiB mapping:        %,d bytes of heap%n", h1 - h0);
            System.out.printf(Locale.ROOT, "resident %d MiB (%,d pages):     %,d bytes of heap = %.2f bytes per resident 4 KiB page%n",
                    bytes >> 20, pages, h2 - h1, (double) (h2 - h1) / pages);
            System.out.printf(Locale.ROOT, "page tables by construction:     %,d bytes (%.2f per page)%n",
                    as.pageTableBytes(), (double) as.pageTableBytes() / pages);
            System.out.printf(Locale.ROOT, "frame table (off-heap, all frames): 24 bytes per frame%n");
            as.munmap(huge, 64L << 40);
        } finally {
            Files.deleteIfExists(swap);
        }
    }
}
