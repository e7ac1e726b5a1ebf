package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE64;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.peerdirect.hca.cx3.ifc.IcmMap;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Mtt;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * The memory the driver lends the firmware ({@code icm.c} from the device's side): the firmware
 * area ({@code MAP_FA}), the auxiliary ICM ({@code MAP_ICM_AUX}) and the ICM proper
 * ({@code MAP_ICM}), a virtual address space of the device whose pages are the driver's. The MTT
 * table lives in ICM: {@code WRITE_MTT} writes entries there by DMA and the firmware reads them
 * back by DMA when a context names an MTT, so an MTT entry exists only in the driver's memory.
 *
 * <p>Lock rules: the firmware thread alone (commands) maps, unmaps, reads and writes.
 */
final class Icm {

    /** One mapped chunk: bus address and size in bytes. */
    private record Chunk(long bus, long size) {
    }

    private final DmaPort port;
    private final List<Chunk> fa = new ArrayList<>();
    private final List<Chunk> aux = new ArrayList<>();
    /** ICM virtual address → chunk. */
    private final TreeMap<Long, Chunk> icm = new TreeMap<>();
    /** Set by SET_ICM_SIZE: the ICM's size in bytes. */
    long icmSize;
    /** The MTT table's ICM address (INIT_HCA) and its entries. */
    long mttBase;
    long mttEntries;

    Icm(DmaPort port) {
        this.port = port;
    }

    /** The entries of a MAP_* mailbox: [virt, bus, size] each, checked for alignment. */
    static List<long[]> entries(MemorySegment box, int n) throws Refused {
        if (n < 1 || n > IcmMap.MAX_ENTRIES) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, n + " map entries (1.." + IcmMap.MAX_ENTRIES + " per mailbox)");
        }
        List<long[]> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long virt = box.get(BE64, (long) i * IcmMap.ENTRY_SIZE + IcmMap.VIRT);
            long phys = box.get(BE64, (long) i * IcmMap.ENTRY_SIZE + IcmMap.PHYS);
            int log = (int) (phys & 0x3f);
            long bus = phys & ~0xfffL;
            if (log > 18 || (bus & ((1L << (log + IcmMap.ICM_PAGE_SHIFT)) - 1)) != 0) {
                throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("map entry %d: bus address 0x%x is not aligned to its size 2^%d pages",
                        i, bus, log));
            }
            out.add(new long[] {virt, bus, 1L << (log + IcmMap.ICM_PAGE_SHIFT)});
        }
        return out;
    }

    void mapFa(List<long[]> e) {
        e.forEach(x -> fa.add(new Chunk(x[1], x[2])));
    }

    void mapAux(List<long[]> e) {
        e.forEach(x -> aux.add(new Chunk(x[1], x[2])));
    }

    long faPages() {
        return fa.stream().mapToLong(c -> c.size >>> 12).sum();
    }

    long auxPages() {
        return aux.stream().mapToLong(c -> c.size >>> 12).sum();
    }

    void unmapFa() {
        fa.clear();
    }

    void unmapAux() {
        aux.clear();
    }

    /** MAP_ICM: each chunk at its virtual address, aligned to its size, inside the ICM size, not over a mapped one. */
    void mapIcm(List<long[]> e) throws Refused {
        for (long[] x : e) {
            long virt = x[0];
            long size = x[2];
            if ((virt & (size - 1)) != 0 || virt < 0 || virt + size > icmSize) {
                throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("ICM chunk at 0x%x of %d bytes: unaligned or outside the ICM size 0x%x "
                        + "(SET_ICM_SIZE)", virt, size, icmSize));
            }
            Map.Entry<Long, Chunk> below = icm.floorEntry(virt + size - 1);
            if (below != null && below.getKey() + below.getValue().size > virt) {
                throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, String.format("ICM at 0x%x is already mapped", virt));
            }
        }
        for (long[] x : e) {
            icm.put(x[0], new Chunk(x[1], x[2]));
        }
    }

    /** UNMAP_ICM of {@code pages} 4 KiB pages from {@code virt}: every chunk inside the range goes. */
    int unmapIcm(long virt, long pages) throws Refused {
        if (pages < 1 || (virt & 0xfff) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("UNMAP_ICM of %d pages at 0x%x", pages, virt));
        }
        long end = virt + (pages << 12);
        List<Long> gone = new ArrayList<>(icm.subMap(virt, true, end, false).keySet());
        gone.removeIf(v -> v + icm.get(v).size > end);
        gone.forEach(icm::remove);
        return gone.size();
    }

    void unmapAllIcm() {
        icm.clear();
    }

    long icmMappedBytes() {
        return icm.values().stream().mapToLong(Chunk::size).sum();
    }

    /** The bus address behind ICM address {@code virt}, or refused: not mapped ({@code ICM_ERROR}). */
    long translate(long virt) throws Refused {
        Map.Entry<Long, Chunk> e = icm.floorEntry(virt);
        if (e == null || virt - e.getKey() >= e.getValue().size) {
            throw new Refused(Mlx4Cmd.STAT_ICM_ERROR, String.format("ICM address 0x%x is not mapped (MAP_ICM)", virt));
        }
        return e.getValue().bus + (virt - e.getKey());
    }

    private long mttAddress(long index) throws Refused {
        if (index < 0 || index >= mttEntries) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "MTT entry " + index + " is outside the MTT table (" + mttEntries + " entries)");
        }
        return translate(mttBase + index * Mtt.ENTRY_SIZE);
    }

    /** WRITE_MTT: {@code n} entries from {@code box} (at its entries offset) into the table from {@code start}. */
    void writeMtt(long start, MemorySegment box, int n) throws Refused {
        if (n < 1 || n > Mtt.MAX_WRITE) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "WRITE_MTT of " + n + " entries (1.." + Mtt.MAX_WRITE + ")");
        }
        mttAddress(start + n - 1); // the whole range first: nothing is written when its end is bad
        for (int i = 0; i < n; i++) {
            long at = mttAddress(start + i);
            long from = Mtt.WRITE_ENTRIES + (long) i * Mtt.ENTRY_SIZE;
            dma(() -> port.write(at, box, from, Mtt.ENTRY_SIZE));
        }
    }

    /**
     * {@code n} MTT entries from byte address {@code mttAddr} of the table: the pages' bus
     * addresses, each present. Read by DMA a page of ICM at a time.
     */
    long[] readMtt(long mttAddr, int n) throws Refused {
        if ((mttAddr & (Mtt.ENTRY_SIZE - 1)) != 0 || n < 1) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("MTT of %d entries at 0x%x (entry-aligned, at least one)", n, mttAddr));
        }
        long first = mttAddr / Mtt.ENTRY_SIZE;
        mttAddress(first + n - 1);
        long[] out = new long[n];
        MemorySegment run = MemorySegment.ofArray(new byte[IcmMap.ICM_PAGE_SIZE]);
        int i = 0;
        while (i < n) {
            long virt = mttBase + (first + i) * Mtt.ENTRY_SIZE;
            int k = (int) Math.min(n - i, (IcmMap.ICM_PAGE_SIZE - (virt & (IcmMap.ICM_PAGE_SIZE - 1))) / Mtt.ENTRY_SIZE);
            long at = mttAddress(first + i);
            dma(() -> port.read(at, run, 0, (long) k * Mtt.ENTRY_SIZE));
            for (int j = 0; j < k; j++) {
                long e = run.get(BE64, (long) j * Mtt.ENTRY_SIZE);
                if ((e & Mtt.PRESENT) == 0) {
                    throw new Refused(Mlx4Cmd.STAT_BAD_RESOURCE, "MTT entry " + (first + i + j) + " is not present (write it first)");
                }
                out[i + j] = e & ~0xfffL;
            }
            i += k;
        }
        return out;
    }

    /** A DMA on the firmware's behalf; one the IOMMU stops is the command's failure. */
    private static void dma(Runnable r) throws Refused {
        try {
            r.run();
        } catch (IommuFault f) {
            throw new Refused(Mlx4Cmd.STAT_INTERNAL_ERR, "a DMA to memory the driver lent was stopped by the IOMMU: " + f.getMessage());
        }
    }

    /** Everything forgotten (a chip reset). */
    void clear() {
        fa.clear();
        aux.clear();
        icm.clear();
        icmSize = 0;
        mttBase = 0;
        mttEntries = 0;
    }
}
