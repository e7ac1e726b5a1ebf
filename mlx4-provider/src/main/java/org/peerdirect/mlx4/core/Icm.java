package org.peerdirect.mlx4.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.peerdirect.hca.cx3.ifc.IcmMap;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;

/**
 * The memory the driver lends the firmware ({@code icm.c}): the firmware area ({@code MAP_FA}),
 * the auxiliary ICM ({@code MAP_ICM_AUX}) and ICM tables mapped chunk by chunk on demand
 * ({@code mlx4_table_get_range}/{@code mlx4_table_put_range}: a chunk is mapped with its first
 * user and unmapped, {@code UNMAP_ICM}, with its last). Only the MTT table is backed this way:
 * the model keeps the other contexts in the device, so their ICM ranges are laid out at
 * {@code INIT_HCA} but never mapped.
 *
 * <p>Lock rules: {@code this} guards the chunk table; commands run under it (a chunk is never
 * unmapped while another thread maps it again).
 */
public final class Icm {

    /** {@code MLX4_TABLE_CHUNK_SIZE} of this driver: 64 KiB, 16 pages. */
    public static final int CHUNK_PAGES = 16;

    private record Chunk(List<DmaCoherentPages.Page> pages, int[] refs) {
    }

    private final Cmd cmd;
    private final Fw fw;
    private final DmaCoherentPages dma;
    private final List<DmaCoherentPages.Page> fa = new ArrayList<>();
    private final List<DmaCoherentPages.Page> aux = new ArrayList<>();
    /** Chunk index (from the table base) → its pages and use count. */
    private final Map<Long, Chunk> chunks = new HashMap<>();
    private long tableBase;
    private int objSize;

    public Icm(Cmd cmd, Fw fw, DmaCoherentPages dma) {
        this.cmd = cmd;
        this.fw = fw;
        this.dma = dma;
    }

    private static List<DmaCoherentPages.Page> alloc(DmaCoherentPages dma, int n, List<DmaCoherentPages.Page> into) {
        for (int i = 0; i < n; i++) {
            into.add(dma.alloc());
        }
        return into;
    }

    /** {@code mlx4_MAP_FA} of {@code pages} pages, then {@code RUN_FW}. */
    public synchronized void mapFaAndRun(int pages) {
        alloc(dma, pages, fa);
        fw.mapCmd(Mlx4Cmd.MAP_FA, fa, -1);
        cmd.cmd(0, 0, 0, Mlx4Cmd.RUN_FW);
    }

    /** {@code mlx4_MAP_ICM_AUX}. */
    public synchronized void mapAux(int pages) {
        alloc(dma, pages, aux);
        fw.mapCmd(Mlx4Cmd.MAP_ICM_AUX, aux, -1);
    }

    /** The table whose chunks {@link #get}/{@link #put} map: its ICM base and entry size. */
    public synchronized void table(long base, int entrySize) {
        this.tableBase = base;
        this.objSize = entrySize;
    }

    private long perChunk() {
        return (long) CHUNK_PAGES * IcmMap.ICM_PAGE_SIZE / objSize;
    }

    /** {@code mlx4_table_get_range}: entries [first, last] are backed by mapped ICM on return. */
    public synchronized void get(long first, long last) {
        long done = -1;
        try {
            for (long c = first / perChunk(); c <= last / perChunk(); c++) {
                Chunk ch = chunks.get(c);
                if (ch == null) {
                    List<DmaCoherentPages.Page> pages = new ArrayList<>(CHUNK_PAGES);
                    try {
                        alloc(dma, CHUNK_PAGES, pages);
                        fw.mapCmd(Mlx4Cmd.MAP_ICM, pages, tableBase + c * CHUNK_PAGES * IcmMap.ICM_PAGE_SIZE);
                    } catch (RuntimeException e) {
                        pages.forEach(dma::free);
                        throw e;
                    }
                    ch = new Chunk(pages, new int[1]);
                    chunks.put(c, ch);
                }
                ch.refs[0]++;
                done = c;
            }
        } catch (RuntimeException e) {
            if (done >= 0) {
                put(first, done * perChunk()); // what this call took
            }
            throw e;
        }
    }

    /** {@code mlx4_table_put_range}: a chunk whose last user went is unmapped and freed. */
    public synchronized void put(long first, long last) {
        for (long c = first / perChunk(); c <= last / perChunk(); c++) {
            Chunk ch = chunks.get(c);
            if (ch != null && --ch.refs[0] == 0) {
                chunks.remove(c);
                unmap(c, ch);
            }
        }
    }

    private void unmap(long c, Chunk ch) {
        try {
            cmd.cmd(tableBase + c * CHUNK_PAGES * IcmMap.ICM_PAGE_SIZE, CHUNK_PAGES, 0, Mlx4Cmd.UNMAP_ICM);
        } catch (RuntimeException gone) {
            // the device is gone or reset: it holds nothing of ours any more
        }
        ch.pages.forEach(dma::free);
    }

    /**
     * {@code mlx4_table_find}: the driver's view of entry {@code index}'s bytes in its ICM page
     * (the entry must be backed: between {@link #get} and {@link #put}).
     */
    public synchronized java.lang.foreign.MemorySegment find(long index) {
        Chunk ch = chunks.get(index / perChunk());
        if (ch == null) {
            throw new IllegalStateException("ICM entry " + index + " is not mapped");
        }
        long off = index % perChunk() * objSize;
        return ch.pages.get((int) (off / IcmMap.ICM_PAGE_SIZE)).mem().asSlice(off % IcmMap.ICM_PAGE_SIZE, objSize);
    }

    /** Chunks mapped now (tools). */
    public synchronized int chunksMapped() {
        return chunks.size();
    }

    /**
     * {@code mlx4_free_icms} and {@code mlx4_UNMAP_FA}: after {@code CLOSE_HCA}, every ICM chunk,
     * the auxiliary ICM and the firmware area go back; the commands are tried (a reset device
     * refuses them) and the pages freed either way.
     */
    public synchronized void freeAll() {
        for (Map.Entry<Long, Chunk> e : List.copyOf(chunks.entrySet())) {
            unmap(e.getKey(), e.getValue());
        }
        chunks.clear();
        try {
            if (!aux.isEmpty()) {
                cmd.cmd(0, 0, 0, Mlx4Cmd.UNMAP_ICM_AUX);
            }
        } catch (RuntimeException gone) {
            // as above
        }
        aux.forEach(dma::free);
        aux.clear();
        try {
            if (!fa.isEmpty()) {
                cmd.cmd(0, 0, 0, Mlx4Cmd.UNMAP_FA);
            }
        } catch (RuntimeException gone) {
            // as above
        }
        fa.forEach(dma::free);
        fa.clear();
    }
}
