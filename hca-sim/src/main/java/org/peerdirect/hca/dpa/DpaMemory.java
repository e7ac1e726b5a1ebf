package org.peerdirect.hca.dpa;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * On-card DPA memory: one device-private segment, not behind the host IOMMU (the NIC reaches it
 * directly, the host only by DMA through the NIC), carved into regions by a first-fit allocator.
 * Each region has an owner (a DPA process id, or a DPA_MEM object's uid as a negative number
 * before a process adopts it); the RTOS checks every thread access against its process's regions.
 * DPA address 0 is never allocated (a null pointer faults).
 *
 * <p>Lock: {@code lock} guards the free list and the region map; the bytes themselves are
 * accessed without it (the memory model orders them).
 */
final class DpaMemory implements AutoCloseable {

    /** Allocation granule and alignment: a cache line. */
    static final long ALIGN = 64;
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);

    /** One allocated range. */
    record Region(long base, long size, int owner) {
        boolean contains(long a, long len) {
            return a >= base && a + len <= base + size && len >= 0;
        }
    }

    private final Arena arena = Arena.ofShared();
    final MemorySegment seg;
    private final ReentrantLock lock = new ReentrantLock();
    /** Free ranges by base. */
    private final TreeMap<Long, Long> free = new TreeMap<>();
    private final TreeMap<Long, Region> used = new TreeMap<>();

    DpaMemory(long bytes) {
        seg = arena.allocate(bytes, 4096);
        free.put(ALIGN, bytes - ALIGN);
    }

    long size() {
        return seg.byteSize();
    }

    /** A region of {@code size} bytes for {@code owner}; throws when the memory is exhausted. */
    Region alloc(long size, int owner) {
        if (size <= 0) {
            throw new IllegalArgumentException("DPA memory allocation of " + size + " bytes");
        }
        if (size > seg.byteSize()) {
            throw new DpaMemoryExhausted(size, seg.byteSize()); // and no rounding overflow below
        }
        long need = (size + ALIGN - 1) & -ALIGN;
        lock.lock();
        try {
            for (Map.Entry<Long, Long> e : free.entrySet()) {
                long base = e.getKey();
                long have = e.getValue(); // read before the removal: TreeMap may reuse the entry for its successor
                if (have >= need) {
                    free.remove(base);
                    if (have > need) {
                        free.put(base + need, have - need);
                    }
                    Region r = new Region(base, need, owner);
                    used.put(base, r);
                    seg.asSlice(base, need).fill((byte) 0);
                    return r;
                }
            }
            throw new DpaMemoryExhausted(need, seg.byteSize());
        } finally {
            lock.unlock();
        }
    }

    /** Gives {@code r} a new owner (a DPA_MEM object adopted by a process). */
    Region chown(Region r, int owner) {
        lock.lock();
        try {
            Region n = new Region(r.base, r.size, owner);
            used.put(r.base, n);
            return n;
        } finally {
            lock.unlock();
        }
    }

    void free(Region r) {
        lock.lock();
        try {
            if (used.remove(r.base) == null) {
                throw new IllegalStateException("DPA memory region at 0x" + Long.toHexString(r.base) + " is not allocated");
            }
            long base = r.base;
            long size = r.size;
            Map.Entry<Long, Long> lo = free.floorEntry(base);
            if (lo != null && lo.getKey() + lo.getValue() == base) {
                free.remove(lo.getKey());
                base = lo.getKey();
                size += lo.getValue();
            }
            Long hi = free.get(base + size);
            if (hi != null) {
                free.remove(base + size);
                size += hi;
            }
            free.put(base, size);
        } finally {
            lock.unlock();
        }
    }

    /** The region holding [a, a+len), or null. */
    Region regionOf(long a, long len) {
        lock.lock();
        try {
            Map.Entry<Long, Region> e = used.floorEntry(a);
            return e != null && e.getValue().contains(a, len) ? e.getValue() : null;
        } finally {
            lock.unlock();
        }
    }

    /** Bytes allocated (0 when everything is freed: the leak check). */
    long allocated() {
        lock.lock();
        try {
            return used.values().stream().mapToLong(Region::size).sum();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        arena.close();
    }
}
