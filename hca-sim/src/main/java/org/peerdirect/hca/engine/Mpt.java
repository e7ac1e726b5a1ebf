package org.peerdirect.hca.engine;

import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

/**
 * One memory protection table entry ({@code struct mlx4_mpt_entry}): key, protection domain,
 * the virtual range, access rights, and the translation of the range to IOVAs (the MTT: DMA
 * blocks with their offsets). An access holds the entry's read lock for its DMA; revocation takes
 * the write lock, so when {@link #revoke} returns no DMA through the entry is in flight and none
 * starts.
 */
final class Mpt {

    enum State { VALID, REVOKED }

    private static final java.util.concurrent.atomic.AtomicLong SERIAL = new java.util.concurrent.atomic.AtomicLong();
    /** Unique across devices (keys are only unique per device): the lock order of transfers. */
    final long serial = SERIAL.incrementAndGet();
    final int key;
    final int pdn;
    final long start;
    final long length;
    final int access;
    /** Offset of block i from the 4 KiB-aligned start, one extra for the end. */
    private final long[] blockOff;
    private final long[] blockIova;
    final StampedLock lock = new StampedLock();
    volatile State state = State.VALID;

    Mpt(int key, int pdn, long start, long length, int access, long[] mttIova, long[] mttLength) {
        this.key = key;
        this.pdn = pdn;
        this.start = start;
        this.length = length;
        this.access = access;
        blockOff = new long[mttIova.length + 1];
        blockIova = mttIova.clone();
        for (int i = 0; i < mttIova.length; i++) {
            blockOff[i + 1] = blockOff[i] + mttLength[i];
        }
    }

    boolean contains(long va, long len) {
        return len >= 0 && va >= start && va + len <= start + length && va + len >= va;
    }

    private int block(long off) {
        if (blockIova.length == 1) {
            return 0;
        }
        int i = Arrays.binarySearch(blockOff, off);
        return i >= 0 ? i : -i - 2;
    }

    /** IOVA of {@code va}; caller checked {@link #contains}. */
    long iova(long va) {
        long off = va - (start & -4096L);
        int i = block(off);
        return blockIova[i] + (off - blockOff[i]);
    }

    /** Bytes from {@code va} contiguous in IOVA space. */
    long contiguous(long va) {
        long off = va - (start & -4096L);
        int i = block(off);
        return blockOff[i + 1] - off;
    }

    /** Stops all DMA through this entry; returns when none is in flight. */
    void revoke() {
        long s = lock.writeLock();
        state = State.REVOKED;
        lock.unlockWrite(s);
    }
}
