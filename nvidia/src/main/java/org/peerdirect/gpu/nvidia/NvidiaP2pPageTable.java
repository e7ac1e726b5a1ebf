package org.peerdirect.gpu.nvidia;

import java.util.ArrayList;
import java.util.List;

/** {@code struct nvidia_p2p_page_table} ({@code nv-p2p.h}): a pin of [va, va+length), made by {@link NvidiaRm#getPages}. */
public final class NvidiaP2pPageTable {
    final NvAllocation alloc;
    public final long va;
    public final long length;
    final int[] pages;
    final int[] slots;
    final NvidiaP2pFreeCallback callback;
    final List<NvidiaP2pDmaMapping> mappings = new ArrayList<>();
    /** The RM tore it down after a free callback ("unlinked"): put_pages is a no-op. */
    boolean unlinked;
    boolean put;
    public final long pinNanos;

    NvidiaP2pPageTable(NvAllocation alloc, long va, long length, int[] pages, int[] slots, NvidiaP2pFreeCallback callback, long pinNanos) {
        this.alloc = alloc;
        this.va = va;
        this.length = length;
        this.pages = pages;
        this.slots = slots;
        this.callback = callback;
        this.pinNanos = pinNanos;
    }

    /** {@code page_size}: always 64 KiB here. */
    public long pageSize() {
        return NvidiaRm.P2P_PAGE_SIZE;
    }

    public int entries() {
        return pages.length;
    }

    public boolean persistent() {
        return callback == null;
    }
}
