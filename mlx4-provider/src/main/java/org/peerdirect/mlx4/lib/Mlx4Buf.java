package org.peerdirect.mlx4.lib;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.mm.AddressSpace;

/**
 * A queue buffer of the library ({@code mlx4_alloc_buf}, {@code mlx4_alloc_db}): anonymous memory
 * of the user's process, whole 4 KiB pages, the last page holding the queue's doorbell record.
 * The library reaches its bytes as the process's CPU does, through per-page views resolved once
 * after the driver pinned the buffer for the device ({@link #resolve}): a pinned page cannot move,
 * so the views stay valid until the driver unpins it.
 */
public final class Mlx4Buf {

    public final AddressSpace process;
    public final long va;
    /** Bytes of the queue proper; the doorbell record page follows. */
    public final long queueBytes;
    private final MemorySegment[] pages;

    private Mlx4Buf(AddressSpace process, long va, long queueBytes) {
        this.process = process;
        this.va = va;
        this.queueBytes = queueBytes;
        this.pages = new MemorySegment[(int) (queueBytes / 4096) + 1];
    }

    /** Maps {@code queueBytes} (rounded to pages) and one doorbell page in the process. */
    public static Mlx4Buf alloc(AddressSpace process, long queueBytes) {
        long q = (queueBytes + 4095) & ~4095L;
        long va = process.mmap(q + 4096);
        return new Mlx4Buf(process, va, q);
    }

    public long length() {
        return queueBytes + 4096;
    }

    /** The doorbell record's user address (the first bytes of the last page). */
    public long dbVa() {
        return va + queueBytes;
    }

    /** Pages of the queue proper (the MTT's entries). */
    public int queuePages() {
        return (int) (queueBytes / 4096);
    }

    /** Resolves the page views once the buffer is pinned (called by the driver after {@code ib_umem_get}). */
    public void resolve() {
        for (int i = 0; i < pages.length; i++) {
            pages[i] = process.pinnedPageView(va + 4096L * i);
        }
    }

    /** The view of the 4 KiB page holding buffer offset {@code off}. */
    MemorySegment page(long off) {
        return pages[(int) (off >>> 12)];
    }

    /** The doorbell record page. */
    MemorySegment db() {
        return pages[pages.length - 1];
    }

    /** A copy of {@code len} bytes from buffer offset {@code off} (within one page): what the process's memory holds there, for tools and tests. */
    public byte[] bytes(long off, int len) {
        return page(off).asSlice(off & 4095, len).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
    }

    /** Unmaps the buffer (after the driver released its pin). */
    public void free() {
        process.munmap(va, length());
    }
}
