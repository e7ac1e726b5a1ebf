package org.peerdirect.bench;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.ib.core.umem.impl.UmemCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * Java heap per resident 4 KiB page of simulated memory, and for untouched address space:
 * {@code ./peerdirect bench --overhead}. Heap is read after full GCs before and after touching
 * every page of a 512 MiB mapping; the frame table is off-heap and reported apart. Then the ODP
 * umem's bookkeeping: a 1 TiB explicit ODP registration and an implicit one before any fault,
 * after faulting 64 MiB of it contiguously and after faulting one page in each of 1024 places,
 * against the kernel's arrays ({@code pfn_list} and {@code dma_list}, 16 bytes per 4 KiB page of
 * the whole range, allocated at registration).
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
        // frames for the 512 MiB below and for the gigabyte an implicit child maps
        try (Mm mm = new Mm((1L << 30) + (64L << 20), false, swap, 16L << 20)) {
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
            as.munmap(a, bytes);
            odp(mm, as);
        } finally {
            Files.deleteIfExists(swap);
        }
    }

    /** The ODP umem's metadata: what {@link IbUmemOdp#metadataBytes()} counts and what the heap shows. */
    static void odp(Mm mm, AddressSpace as) throws InterruptedException {
        Iommu iommu = new Iommu(mm);
        IommuDomain domain = iommu.createDomain("odp-overhead");
        DmaDevice dev = new DmaDevice() {
            @Override
            public String name() {
                return "odp-overhead";
            }

            @Override
            public DmaMapper dma() {
                return domain;
            }
        };
        UmemCore umems = new UmemCore(new PeerMemoryController(null, null));
        long tib = 1L << 40;
        long va = as.mmap(tib);
        int access = IbAccess.ON_DEMAND | IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE;
        long h0 = heapUsed();
        IbUmemOdp u = umems.umemOdpGet(as, dev, va, tib, access, UmemOdpInvalidate.UNMAP_ONLY);
        IbUmemOdp implicit = umems.umemOdpAllocImplicit(as, dev, access);
        long h1 = heapUsed();
        System.out.printf(Locale.ROOT, "%nODP umem, 1 TiB explicit + implicit, untouched: %,d bytes of heap (metadata %,d + %,d); "
                + "the kernel's lists for 1 TiB: %,d bytes%n", h1 - h0, u.metadataBytes(), implicit.metadataBytes(), (tib >> 12) * 16);
        long contiguous = 64L << 20;
        u.mapDmaAndLock(va, contiguous, IbUmemOdp.ODP_READ_ALLOWED | IbUmemOdp.ODP_WRITE_ALLOWED, true);
        u.unlock();
        long h2 = heapUsed();
        System.out.printf(Locale.ROOT, "  after faulting 64 MiB contiguously (%,d pages): metadata %,d bytes = %.2f per mapped page%n",
                contiguous >> 12, u.metadataBytes(), (double) u.metadataBytes() / (contiguous >> 12));
        long before = u.metadataBytes();
        for (int i = 1; i <= 1024; i++) {
            long at = va + i * (tib / 1025);
            u.mapDmaAndLock(at, 8, IbUmemOdp.ODP_READ_ALLOWED, true);
            u.unlock();
        }
        System.out.printf(Locale.ROOT, "  after one page in each of 1024 places: +%,d bytes = %.0f per scattered page (one 512-entry chunk each)%n",
                u.metadataBytes() - before, (double) (u.metadataBytes() - before) / 1024);
        System.out.printf(Locale.ROOT, "  heap growth while 64 MiB was faulted (frames' page tables included): %,d bytes%n", h2 - h1);
        u.release();
        // the implicit MR after touching 1 GiB: one child (mlx5's MLX5_IMR_MTT_SIZE) over a
        // gigabyte-aligned gigabyte, every page faulted in
        long g = 1L << 30;
        long gva = as.mmap(2 * g);
        long base = gva + g - 1 & -g;
        long h3 = heapUsed();
        IbUmemOdp child = implicit.allocChild(base, g, UmemOdpInvalidate.UNMAP_ONLY);
        child.mapDmaAndLock(base, g, IbUmemOdp.ODP_READ_ALLOWED | IbUmemOdp.ODP_WRITE_ALLOWED, true);
        child.unlock();
        long h4 = heapUsed();
        System.out.printf(Locale.ROOT, "implicit ODP umem after touching 1 GiB (one 1 GiB child, %,d pages mapped): metadata %,d bytes = %.2f per mapped "
                + "page (parent %,d); heap growth %,d bytes (frames' page tables included); the kernel: the child's lists %,d bytes, "
                + "plus mlx5's KSM parent %,d bytes of device-visible table from registration%n", g >> 12, child.metadataBytes(),
                (double) child.metadataBytes() / (g >> 12), implicit.metadataBytes(), h4 - h3, (g >> 12) * 16, (1L << 17) * 16);
        child.release();
        as.munmap(gva, 2 * g);
        implicit.release();
        as.munmap(va, tib);
        iommu.destroyDomain(domain);
    }
}
