package org.peerdirect.gpu.nvidia;

import static org.peerdirect.gpu.nvidia.NvidiaRm.P2P_PAGE_SIZE;
import static org.peerdirect.gpu.nvidia.NvidiaRm.PIN_BASE_NS;
import static org.peerdirect.gpu.nvidia.NvidiaRm.PIN_PAGE_NS;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.peerdirect.gpu.ifc.GpuRegs;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The peer-to-peer API of one GPU's RM ({@code nv-p2p.c} of open-gpu-kernel-modules, the calls
 * {@code nv-p2p.h} declares): pins of a range's 64 KiB pages into BAR1 slots
 * ({@code nvidia_p2p_get_pages[_persistent]}), their DMA mappings for a peer device
 * ({@code nvidia_p2p_dma_map_pages}: the slots through {@code dma_map_resource}) and the puts.
 * {@link NvidiaRm} keeps the public entry points and the allocations the pins are made in; the
 * two kinds of pins and the free callback's order are described there.
 *
 * <p>Lock: the RM's monitor ({@code rm}) guards the page tables, their mappings and the counters
 * here, as it guards the allocations; every method takes it or asserts it. Mapping and unmapping
 * in a peer's IOMMU domain happen under it (the IOMMU never calls back).
 */
final class NvP2p {

    private final NvidiaRm rm;
    private final PciFunction fn;
    private final GpuMemory mem;
    private final GpuFw gpu;
    // ---- guarded by rm
    private long modelledPinNanos;
    private long pins;

    NvP2p(NvidiaRm rm, PciFunction fn, GpuMemory mem, GpuFw gpu) {
        this.rm = rm;
        this.fn = fn;
        this.mem = mem;
        this.gpu = gpu;
    }

    /**
     * {@code nvidia_p2p_get_pages[_persistent]}: the pages of [va, va+length) of one live
     * allocation mapped into free BAR1 slots and referenced; {@code callback} null for a
     * persistent pin. The cost of the pin is charged to the model, never slept.
     *
     * @see "nvidia_p2p_get_pages() in kernel-open/nvidia/nv-p2p.c"
     */
    NvidiaP2pPageTable pin(int pid, long va, long length, NvidiaP2pFreeCallback callback) {
        synchronized (rm) {
            if ((va & (P2P_PAGE_SIZE - 1)) != 0 || (length & (P2P_PAGE_SIZE - 1)) != 0 || length <= 0) {
                throw new KernelException(Errno.EINVAL, String.format("nvidia_p2p_get_pages: address 0x%x or length 0x%x are not aligned to 64 KiB", va,
                        length));
            }
            NvAllocation a = rm.containing(pid, va, length, "nvidia_p2p_get_pages");
            int n = (int) (length / P2P_PAGE_SIZE);
            int freeSlots = mem.freeSlots();
            if (n > freeSlots) {
                throw new KernelException(Errno.ENOMEM, String.format(
                        "nvidia_p2p_get_pages: %d KiB do not fit in the BAR1 aperture of %s (%d of %d slots of 64 KiB free)",
                        length >> 10, rm.name(), freeSlots, gpu.bar1Slots));
            }
            int first = (int) ((va - a.va) / P2P_PAGE_SIZE);
            int[] pages = Arrays.copyOfRange(a.pages, first, first + n);
            int[] slots = mem.mapSlots(pages);
            mem.ref(pages);
            long cost = PIN_BASE_NS + n * PIN_PAGE_NS;
            modelledPinNanos += cost;
            pins++;
            NvidiaP2pPageTable t = new NvidiaP2pPageTable(a, va, length, pages, slots, callback, cost);
            a.tables.add(t);
            return t;
        }
    }

    /**
     * {@code nvidia_p2p_put_pages[_persistent]}: unpins. A table the RM already tore down after a
     * free callback returns quietly ({@code NV_ERR_OBJECT_NOT_FOUND} is success).
     *
     * @throws KernelException EINVAL for the other kind's put or a second put, EBUSY while it is still DMA-mapped
     * @see "nvidia_p2p_put_pages() in kernel-open/nvidia/nv-p2p.c"
     */
    void put(NvidiaP2pPageTable t, boolean persistent) {
        synchronized (rm) {
            if (t.persistent() != persistent) {
                throw new KernelException(Errno.EINVAL, "nvidia_p2p_put_pages" + (persistent ? "_persistent" : "") + " of a "
                        + (t.persistent() ? "persistent" : "non-persistent") + " page table");
            }
            if (t.unlinked) {
                return;
            }
            if (t.put) {
                throw new KernelException(Errno.EINVAL, String.format("nvidia_p2p_put_pages: the page table of 0x%x was put already", t.va));
            }
            for (NvidiaP2pDmaMapping m : t.mappings) {
                if (!m.unmapped) {
                    throw new KernelException(Errno.EBUSY, String.format("nvidia_p2p_put_pages: the page table of 0x%x is still DMA-mapped", t.va));
                }
            }
            tearDown(t);
            t.put = true;
        }
    }

    /**
     * {@code nvidia_p2p_dma_map_pages(peer, page_table, &mapping)}: the pinned pages' BAR1 slots
     * mapped into the peer device's IOMMU domain, one {@code dma_map_resource} per run of
     * consecutive slots; one bus address per 64 KiB page. Nothing stays mapped on failure.
     *
     * @see "nvidia_p2p_dma_map_pages() in kernel-open/nvidia/nv-p2p.c"
     */
    NvidiaP2pDmaMapping dmaMapPages(DmaMapper peer, NvidiaP2pPageTable t) {
        synchronized (rm) {
            if (t.put || t.unlinked) {
                throw new KernelException(Errno.EINVAL, String.format("nvidia_p2p_dma_map_pages: the page table of 0x%x is no longer pinned", t.va));
            }
            long[] addrs = new long[t.slots.length];
            List<long[]> runs = new ArrayList<>();
            try {
                int i = 0;
                while (i < t.slots.length) {
                    int j = i + 1;
                    while (j < t.slots.length && t.slots[j] == t.slots[j - 1] + 1) {
                        j++;
                    }
                    long bytes = (j - i) * P2P_PAGE_SIZE;
                    long iova = peer.dmaMapResource(fn.resource(GpuRegs.BAR1), t.slots[i] * P2P_PAGE_SIZE, bytes, DmaDirection.BIDIRECTIONAL);
                    runs.add(new long[] {iova, bytes / 4096});
                    for (int k = i; k < j; k++) {
                        addrs[k] = iova + (k - i) * P2P_PAGE_SIZE;
                    }
                    i = j;
                }
            } catch (RuntimeException e) {
                for (long[] r : runs) {
                    peer.dmaUnmap(r[0], (int) r[1]);
                }
                throw e;
            }
            NvidiaP2pDmaMapping m = new NvidiaP2pDmaMapping(t, peer, addrs, runs);
            t.mappings.add(m);
            return m;
        }
    }

    /**
     * {@code nvidia_p2p_dma_unmap_pages}: a mapping the RM already tore down (after a free
     * callback) returns quietly.
     */
    void dmaUnmapPages(NvidiaP2pDmaMapping m) {
        synchronized (rm) {
            if (m.unmapped) {
                return;
            }
            unmapRuns(m);
            m.table.mappings.remove(m);
        }
    }

    /**
     * Unmaps a page table's DMA mappings and BAR1 slots and drops its page references: a put, or
     * the RM's own teardown once a free callback returned ({@code nv_p2p_free_page_table}).
     */
    void tearDown(NvidiaP2pPageTable t) {
        assert Thread.holdsLock(rm);
        for (NvidiaP2pDmaMapping m : t.mappings) {
            if (!m.unmapped) {
                unmapRuns(m);
            }
        }
        mem.unmapSlots(t.slots);
        t.alloc.tables.remove(t);
        mem.unref(t.pages);
    }

    private static void unmapRuns(NvidiaP2pDmaMapping m) {
        for (long[] r : m.runs) {
            m.peer.dmaUnmap(r[0], (int) r[1]);
        }
        m.unmapped = true;
    }

    /** Pins made so far. */
    long pins() {
        assert Thread.holdsLock(rm);
        return pins;
    }

    /** Modelled time spent pinning BAR1 pages so far (never slept). */
    long modelledPinNanos() {
        assert Thread.holdsLock(rm);
        return modelledPinNanos;
    }
}
