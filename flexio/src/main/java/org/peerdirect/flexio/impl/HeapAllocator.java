package org.peerdirect.flexio.impl;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The host-managed allocator over a DPA process's heap (S001: "the heap is managed from the host
 * process"): first fit over a free list of address-ordered ranges, blocks 64-byte aligned (a
 * cache line, and every descriptor's alignment), neighbours merged at free. Guarded by the owning
 * process's lock.
 */
public final class HeapAllocator {

    static final long ALIGN = 64;

    private final long base;
    private final long size;
    /** start → length of each free range, address order. */
    private final TreeMap<Long, Long> free = new TreeMap<>();
    /** start → {allocated length, requested length}. */
    private final Map<Long, long[]> used = new HashMap<>();
    private long requested;
    private long allocated;

    public HeapAllocator(long base, long size) {
        this.base = base;
        this.size = size;
        if (size > 0) {
            free.put(base, size);
        }
    }

    /** A block of at least {@code bytes}, or 0 when no free range holds it ({@code flexio_buf_dev_alloc}'s daddr 0). */
    public long alloc(long bytes) {
        if (bytes <= 0) {
            return 0;
        }
        long len = (bytes + ALIGN - 1) & -ALIGN;
        for (Map.Entry<Long, Long> e : free.entrySet()) {
            if (e.getValue() >= len) {
                long at = e.getKey();
                free.remove(at);
                if (e.getValue() > len) {
                    free.put(at + len, e.getValue() - len);
                }
                used.put(at, new long[] {len, bytes});
                requested += bytes;
                allocated += len;
                return at;
            }
        }
        return 0;
    }

    /** @return false when {@code daddr} is no block of this heap (a double free, a foreign address) */
    public boolean free(long daddr) {
        long[] b = used.remove(daddr);
        if (b == null) {
            return false;
        }
        requested -= b[1];
        allocated -= b[0];
        long at = daddr;
        long len = b[0];
        Map.Entry<Long, Long> prev = free.floorEntry(at);
        if (prev != null && prev.getKey() + prev.getValue() == at) {
            at = prev.getKey();
            len += prev.getValue();
            free.remove(at);
        }
        Long next = free.get(daddr + b[0]);
        if (next != null) {
            free.remove(daddr + b[0]);
            len += next;
        }
        free.put(at, len);
        return true;
    }

    /** Whether {@code [daddr, daddr+len)} lies in the heap. */
    public boolean contains(long daddr, long len) {
        return len >= 0 && daddr >= base && daddr + len <= base + size;
    }

    public long base() {
        return base;
    }

    public long size() {
        return size;
    }

    public long requested() {
        return requested;
    }

    public long allocated() {
        return allocated;
    }

    public int blocks() {
        return used.size();
    }
}
