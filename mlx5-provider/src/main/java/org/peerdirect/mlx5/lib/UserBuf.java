package org.peerdirect.mlx5.lib;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.mm.AddressSpace;

/**
 * A queue buffer of the user library ({@code mlx5_alloc_buf}): anonymous memory of the user's
 * process, whole 4 KiB pages, the last page holding the queue's doorbell record. The library
 * reaches its bytes as the process's CPU does, through per-page views it resolves once, after the
 * driver pinned the buffer for the device ({@link #resolve}): a pinned page cannot move, so the
 * views stay valid (what the CPU's TLB holds for it) until the driver unpins it.
 */
public final class UserBuf {

    public final AddressSpace process;
    public final long va;
    /** Bytes of the queue proper; the doorbell record page follows. */
    public final long queueBytes;
    private final MemorySegment[] pages;

    private UserBuf(AddressSpace process, long va, long queueBytes) {
        this.process = process;
        this.va = va;
        this.queueBytes = queueBytes;
        this.pages = new MemorySegment[(int) (queueBytes / 4096) + 1];
    }

    /** Maps {@code queueBytes} (rounded to pages) and one doorbell page in the process. */
    public static UserBuf alloc(AddressSpace process, long queueBytes) {
        long q = (queueBytes + 4095) & ~4095L;
        long va = process.mmap(q + 4096);
        return new UserBuf(process, va, q);
    }

    public long length() {
        return queueBytes + 4096;
    }

    /** The doorbell record's user address (the first 8 bytes of the last page). */
    public long dbrVa() {
        return va + queueBytes;
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
    MemorySegment dbr() {
        return pages[pages.length - 1];
    }

    /** Unmaps the buffer (after the driver released its pin). */
    public void free() {
        process.munmap(va, length());
    }
}
