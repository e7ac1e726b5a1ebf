package org.peerdirect.gpu.model;

import static org.peerdirect.gpu.ifc.GpuRpc.PAGE_SIZE;
import static org.peerdirect.gpu.ifc.GpuRpc.RESULT_BAD_ARGUMENT;
import static org.peerdirect.gpu.ifc.GpuRpc.RESULT_BAD_STATE;
import static org.peerdirect.gpu.ifc.GpuRpc.RESULT_GPU_GONE;
import static org.peerdirect.gpu.ifc.GpuRpc.RESULT_HOST_DMA_FAULT;
import static org.peerdirect.gpu.ifc.GpuRpc.RESULT_OK;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.BitSet;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

import org.peerdirect.kernel.dma.DmaPort;

/**
 * The GPU's memory side: video memory in 64 KiB pages (host memory committed page by page on first
 * touch, {@code Mm.deviceMemory}), which pages are allocated, the BAR1 page table, the copy engine
 * and the counters. What the firmware ({@link Gsp}) executes its commands on and what the BARs
 * resolve through; hardware vocabulary only.
 *
 * <p>Results of the commands are {@code (detail << 32) | RESULT_*} ({@link #result}): a command is
 * checked whole before anything changes.
 *
 * <p>Thread safety: the BAR1 page table is an atomic array read lock-free by every peer DMA; the
 * touched-chunk set is atomic; {@link #allocated} and {@link #mapCount} are changed and read only
 * under the firmware's lock (the commands are serialised there); copies take no lock of their own.
 */
final class VideoMemory {

    private static final long CHUNK = 2L << 20;

    private final long vramBytes;
    private final Arena arena = Arena.ofShared();
    /** All of video memory, committed by the host where touched. */
    private final MemorySegment vram;
    /** 2 MiB chunks the copy engine or a peer touched. */
    private final AtomicLongArray touched;
    /** BAR1 slot -> video-memory page + 1, 0 when the slot maps nothing. */
    private final AtomicIntegerArray bar1;
    /**
     * The 64 KiB view of each video-memory page, made on first use and kept: a peer's DMA through
     * BAR1 asks for a page per transfer, and a view made each time is an allocation per DMA. A
     * racing first use makes two equal views, one kept (views are immutable).
     */
    private final MemorySegment[] pageViews;
    /** Pages allocated ({@code VRAM_ALLOC}); under the firmware's lock. */
    private final BitSet allocated = new BitSet();
    /** BAR1 slots mapping each page; under the firmware's lock. */
    private final int[] mapCount;
    private final LongAdder copied = new LongAdder();
    private volatile boolean dead;

    VideoMemory(long vramBytes, long bar1Bytes) {
        this.vramBytes = vramBytes;
        this.vram = org.peerdirect.kernel.mm.Mm.deviceMemory(vramBytes, arena);
        this.touched = new AtomicLongArray((int) ((vramBytes / CHUNK + 63) / 64));
        this.bar1 = new AtomicIntegerArray(Math.toIntExact(bar1Bytes / PAGE_SIZE));
        this.pageViews = new MemorySegment[Math.toIntExact(vramBytes / PAGE_SIZE)];
        this.mapCount = new int[pageViews.length];
    }

    static long result(int result, long detail) {
        return detail << 32 | result;
    }

    int pages() {
        return pageViews.length;
    }

    int slots() {
        return bar1.length();
    }

    /** BAR1's aperture: the video memory behind BAR1 offset {@code off} now, to the end of its 64 KiB page, or null. */
    MemorySegment bar1Page(long off) {
        if (dead) {
            return null;
        }
        int e = bar1.get((int) (off / PAGE_SIZE));
        if (e == 0) {
            return null;
        }
        // from the page to the end of the 64 KiB GPU page the slot maps: contiguous behind the slot's later BAR pages
        long in = off & (PAGE_SIZE - 1) & -4096L;
        MemorySegment page = page(e - 1);
        return in == 0 ? page : page.asSlice(in);
    }

    /**
     * BAR2's aperture (the model's own CPU window): video memory from {@code off} to its end,
     * which never moves behind the window. Marks nothing touched: a mapping is not an access.
     */
    MemorySegment cpuWindowPage(long off) {
        return dead || off >= vramBytes ? null : vram.asSlice(off);
    }

    /** The 64 KiB of video-memory page {@code p}; marks its chunk touched. */
    private MemorySegment page(int p) {
        touch(p);
        MemorySegment view = pageViews[p];
        if (view == null) {
            view = vram.asSlice((long) p * PAGE_SIZE, PAGE_SIZE);
            pageViews[p] = view;
        }
        return view;
    }

    private void touch(int p) {
        long c = (long) p * PAGE_SIZE / CHUNK;
        long bit = 1L << (c & 63);
        if ((touched.get((int) (c >>> 6)) & bit) == 0) {
            touched.getAndAccumulate((int) (c >>> 6), bit, (a, b) -> a | b);
        }
    }

    /** A range [first, first+count) of {@code n} things, count at least 1. */
    private static boolean inRange(long first, long count, int n) {
        return count >= 1 && first >= 0 && first + count <= n;
    }

    // ------------------------------------------------------------------ commands (under the firmware's lock)

    long alloc(int first, int count) {
        if (!inRange(first, count & 0xffff_ffffL, pages())) {
            return result(RESULT_BAD_ARGUMENT, first);
        }
        int busy = allocated.nextSetBit(first);
        if (busy >= 0 && busy < first + count) {
            return result(RESULT_BAD_STATE, busy);
        }
        allocated.set(first, first + count);
        return RESULT_OK;
    }

    long free(int first, int count) {
        if (!inRange(first, count & 0xffff_ffffL, pages())) {
            return result(RESULT_BAD_ARGUMENT, first);
        }
        for (int p = first; p < first + count; p++) {
            if (!allocated.get(p) || mapCount[p] != 0) {
                return result(RESULT_BAD_STATE, p);
            }
        }
        allocated.clear(first, first + count);
        return RESULT_OK;
    }

    long map(int slot, int page, int count) {
        if (!inRange(slot, count & 0xffff_ffffL, slots())) {
            return result(RESULT_BAD_ARGUMENT, slot);
        }
        if (!inRange(page, count & 0xffff_ffffL, pages())) {
            return result(RESULT_BAD_ARGUMENT, page);
        }
        for (int i = 0; i < count; i++) {
            if (bar1.get(slot + i) != 0) {
                return result(RESULT_BAD_STATE, slot + i);
            }
            if (!allocated.get(page + i)) {
                return result(RESULT_BAD_STATE, page + i);
            }
        }
        for (int i = 0; i < count; i++) {
            mapCount[page + i]++;
            bar1.set(slot + i, page + i + 1);
        }
        return RESULT_OK;
    }

    long unmap(int slot, int count) {
        if (!inRange(slot, count & 0xffff_ffffL, slots())) {
            return result(RESULT_BAD_ARGUMENT, slot);
        }
        for (int i = 0; i < count; i++) {
            if (bar1.get(slot + i) == 0) {
                return result(RESULT_BAD_STATE, slot + i);
            }
        }
        for (int i = 0; i < count; i++) {
            mapCount[bar1.getAndSet(slot + i, 0) - 1]--; // from now on a peer reaching it is a stray access
        }
        return RESULT_OK;
    }

    /** A copy-engine range inside one allocated page, or its refusal. */
    private long checkPage(int p, int off, int len) {
        if (p < 0 || p >= pages()) {
            return result(RESULT_BAD_ARGUMENT, p);
        }
        if (off < 0 || len < 0 || (long) off + len > PAGE_SIZE) {
            return result(RESULT_BAD_ARGUMENT, off < 0 || off >= PAGE_SIZE ? off : len);
        }
        if (!allocated.get(p)) {
            return result(RESULT_BAD_STATE, p);
        }
        return dead ? result(RESULT_GPU_GONE, p) : RESULT_OK;
    }

    /** Host memory at bus address {@code host} into page {@code p} ({@code toDevice}), or the other way. */
    long copyHost(DmaPort dma, int p, int off, int len, long host, boolean toDevice) {
        long r = checkPage(p, off, len);
        if (r != RESULT_OK || len == 0) {
            return r; // nothing to move: no DMA
        }
        try {
            if (toDevice) {
                dma.read(host, page(p), off, len);
            } else {
                dma.write(host, page(p), off, len);
            }
        } catch (IllegalStateException gone) { // the memory was freed under the copy: the card is going
            return result(RESULT_GPU_GONE, p);
        } catch (RuntimeException fault) { // the IOMMU refused the host range: nothing moved
            return result(RESULT_HOST_DMA_FAULT, host >>> 12);
        }
        copied.add(len);
        return RESULT_OK;
    }

    long copyDevice(int src, int srcOff, int dst, int dstOff, int len) {
        long r = checkPage(src, srcOff, len);
        if (r == RESULT_OK) {
            r = checkPage(dst, dstOff, len);
        }
        if (r != RESULT_OK) {
            return r;
        }
        try {
            MemorySegment.copy(page(src), srcOff, page(dst), dstOff, len);
        } catch (IllegalStateException gone) {
            return result(RESULT_GPU_GONE, src);
        }
        copied.add(len);
        return RESULT_OK;
    }

    // ------------------------------------------------------------------ counters

    int allocatedPages() {
        return allocated.cardinality();
    }

    int bar1Mapped() {
        int n = 0;
        for (int i = 0; i < bar1.length(); i++) {
            if (bar1.get(i) != 0) {
                n++;
            }
        }
        return n;
    }

    long committedBytes() {
        long n = 0;
        for (int i = 0; i < touched.length(); i++) {
            n += Long.bitCount(touched.get(i));
        }
        return n * CHUNK;
    }

    long copiedBytes() {
        return copied.sum();
    }

    /**
     * The card is gone: the windows map nothing any more, then the video memory is freed. A peer
     * DMA still in flight through BAR1 fails as a use-after-free, it never touches freed memory
     * (the segments' scope is closed).
     */
    void close() {
        dead = true;
        arena.close();
    }
}
