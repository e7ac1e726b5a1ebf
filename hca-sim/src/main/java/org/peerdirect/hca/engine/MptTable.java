package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicLong;

/**
 * One HCA's protection table (MPT): its entries by index, the key byte each index rotates, the
 * commands that fill and empty it ({@code SW2HW_MPT}, mlx5's {@code CREATE_MKEY} in its MTT,
 * UMR-enabled and on-demand forms, {@code HW2SW_MPT}) and the UMR work requests that change an
 * entry. {@link HcaDevice} keeps the public commands and delegates here.
 *
 * <p>Lock rules: the device monitor ({@link HcaDevice}'s {@code this}) guards the writers: the
 * methods that assert it are called by the device's synchronized commands. Readers on the data
 * path ({@link #mpt}) read the array without a lock: an entry publishes its identity through
 * final fields, its mutable state is volatile or guarded by its own lock.
 */
final class MptTable {

    private final HcaDevice dev;
    private final Mpt[] mpts = new Mpt[HcaDevice.MAX_MPT];
    private final IndexTable mptIndices = new IndexTable(1, HcaDevice.MAX_MPT);
    /** The key byte of each MPT index, advanced at every allocation: a stale key misses the new entry. */
    private final byte[] keyByte = new byte[HcaDevice.MAX_MPT];

    MptTable(HcaDevice dev) {
        this.dev = dev;
    }

    /**
     * {@code SW2HW_MPT} with its MTT: makes a key valid for [start, start+length) with the
     * {@code PERM_*} rights, translated by the MTT (IOVA and length of each block, in order,
     * the first starting at the 4 KiB page of {@code start}). Returns the key
     * ({@code index << 8 | key byte}, as mlx4 builds lkey/rkey); the key byte rotates per index
     * ({@code keyByteOrMinus1} -1), or is the one the driver chose (mlx5's {@code CREATE_MKEY},
     * access mode MTT: {@code mkey_7_0}).
     */
    int sw2hwMpt(int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength, int keyByteOrMinus1) {
        return sw2hwMpt(pdn, start, length, perm, mttIova, mttLength, keyByteOrMinus1, null);
    }

    /** {@link #sw2hwMpt} whose IOVAs address {@code space} (null: the device's IOMMU domain; {@link Mpt#space}). */
    int sw2hwMpt(int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength, int keyByteOrMinus1,
            org.peerdirect.kernel.dma.DmaPort space) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (mttIova.length != mttLength.length || mttIova.length == 0) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": SW2HW_MPT with an MTT of "
                    + mttIova.length + " addresses and " + mttLength.length + " lengths");
        }
        int index = mptIndices.alloc();
        if (index < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": MPT table full (" + (HcaDevice.MAX_MPT - 1) + " entries alive)");
        }
        int kb = keyByteOrMinus1 < 0 ? ++keyByte[index] & 0xff : keyByteOrMinus1 & 0xff;
        int key = (index << 8) | kb;
        mpts[index] = new Mpt(key, pdn, start, length, perm, mttIova, mttLength, space);
        return key;
    }

    /**
     * mlx4's {@code SW2HW_MPT} at the index the driver allocated ({@code mlx4_mpt_reserve}) with
     * the key byte it chose: the key is {@code index << 8 | keyByte}.
     *
     * @throws HwCommandException BAD_INDEX outside the table, BAD_RES_STATE when the index is in use
     */
    int sw2hwMptAt(int index, int keyByte, int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (mttIova.length != mttLength.length || mttIova.length == 0) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": SW2HW_MPT with an MTT of "
                    + mttIova.length + " addresses and " + mttLength.length + " lengths");
        }
        if (index <= 0 || index >= HcaDevice.MAX_MPT) {
            throw new HwCommandException(HwCommandException.STAT_BAD_INDEX, dev.name + ": MPT index " + index + " (1.." + (HcaDevice.MAX_MPT - 1) + ")");
        }
        if (!mptIndices.claim(index)) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RES_STATE, dev.name + ": MPT " + index + " is already in hardware ownership");
        }
        int key = index << 8 | keyByte & 0xff;
        mpts[index] = new Mpt(key, pdn, start, length, perm, mttIova, mttLength);
        return key;
    }

    /**
     * mlx5's {@code CREATE_MKEY} with {@code umr_en} (access mode MTT): an entry with room for
     * {@code capacity} MTT entries of {@code 2^pageShift}-byte pages, the first {@code n} from
     * {@code mtt} (IOVA | {@link HcaDevice#MTT_READ} | {@link HcaDevice#MTT_WRITE}, or 0: not present), that UMR
     * work requests may change later ({@link #umr}). With {@code free} it admits nothing until a
     * UMR enables it (the mkey cache's entries). {@code keyByte} is the driver's {@code mkey_7_0}.
     * With {@code indirect} (mlx5's KSM access mode) the entries are blocks of {@code 2^pageShift}
     * bytes pointing into other entries, all without a target at creation; {@code mtt} must then be empty.
     */
    int createUmrMpt(int pdn, long start, long length, int perm, int pageShift, int capacity, boolean free, long[] mtt,
            int n, int keyByte, boolean indirect) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (pageShift < 12 || pageShift > 30 || length < 0 || start + length < start || n < 0 || n > capacity) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format(
                    "%s: UMR-enabled mkey of %d bytes at 0x%x, pages of 2^%d bytes, %d of %d MTT entries given (need no wrap, "
                            + "12 <= shift <= 30, given <= capacity)", dev.name, length, start, pageShift, n, capacity));
        }
        if (indirect && n > 0) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": an indirect (KSM) mkey is created without targets; UMR writes them");
        }
        if (!free && !indirect && Mpt.pagesSpanned(start, length, pageShift) > capacity) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format(
                    "%s: %d bytes at 0x%x need more than the mkey's %d MTT entries", dev.name, length, start, capacity));
        }
        int index = mptIndices.alloc();
        if (index < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": MPT table full (" + (HcaDevice.MAX_MPT - 1) + " entries alive)");
        }
        try {
            Mpt m = new Mpt((index << 8) | keyByte & 0xff, pdn, start, length, perm, pageShift, capacity, true, indirect);
            if (n > 0) {
                m.update(0, mtt, n);
            }
            m.state = free ? Mpt.State.FREE : Mpt.State.VALID;
            mpts[index] = m;
            return m.key;
        } catch (HwCommandException e) {
            mptIndices.free(index);
            throw e;
        }
    }

    /**
     * Executes the UMR work request of a REG_UMR QP's send slot: fetches its translation list by
     * DMA (the reserved lkey 0: bus addresses of this function's domain), then changes the mkey
     * ({@link Mpt#umr}). Returns when no DMA admitted before the change is in flight. The outcome:
     * success; a local protection error for a key that names no UMR-enabled entry, a failed free
     * check, a list not behind the reserved lkey or not mapped for the device; a local QP
     * operation error for what the mkey cannot take (translations outside its MTT, a range longer
     * than its MTT covers, a bad page size or entry); a local length error for a list shorter
     * than its entries.
     */
    Outcome umr(SendWqe w) {
        UmrWqe u = w.umr;
        if (w.opcode != Wqe.OP_UMR || u == null) {
            return Outcome.LOC_QP_OP_ERR;
        }
        Mpt m = mpt(u.mkey);
        if (m == null) {
            return Outcome.LOC_PROT_ERR;
        }
        long[] xlt = NO_XLT;
        // the list's octowords hold two MTT entries each, or one KSM entry {be32 reserved, be32 key, be64 va}
        int n = m.indirect ? u.xltEntries / 2 : u.xltEntries;
        long first = m.indirect ? u.xltOffset / 2 : u.xltOffset;
        if (n > 0) {
            if (u.xltLkey != 0) {
                return Outcome.LOC_PROT_ERR;
            }
            if (u.xltByteCount < 8L * u.xltEntries) {
                return Outcome.LOC_LEN_ERR;
            }
            java.lang.foreign.MemorySegment list = java.lang.foreign.MemorySegment.ofArray(new byte[8 * u.xltEntries]);
            try {
                dev.domain.read(u.xltIova, list, 0, list.byteSize());
            } catch (org.peerdirect.kernel.iommu.IommuFault f) {
                return Outcome.LOC_PROT_ERR;
            }
            xlt = new long[u.xltEntries];
            for (int i = 0; i < n; i++) {
                if (m.indirect) {
                    int key = list.get(BE32, 16L * i + 4);
                    xlt[2 * i] = key == HcaDevice.NULL_MKEY ? 0 : key & 0xffff_ffffL; // the null mkey: no target, an access faults
                    xlt[2 * i + 1] = list.get(BE64, 16L * i + 8);
                } else {
                    xlt[i] = list.get(BE64, 8L * i);
                }
            }
        }
        Outcome o = m.umr(u, xlt, first, n);
        if (o == Outcome.SUCCESS) {
            umrs.incrementAndGet();
        }
        return o;
    }

    private static final long[] NO_XLT = new long[0];
    private static final java.lang.foreign.ValueLayout.OfInt BE32 = java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED
            .withOrder(java.nio.ByteOrder.BIG_ENDIAN);
    private static final java.lang.foreign.ValueLayout.OfLong BE64 = java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED
            .withOrder(java.nio.ByteOrder.BIG_ENDIAN);
    private final AtomicLong umrs = new java.util.concurrent.atomic.AtomicLong();

    /** UMR work requests executed successfully. */
    long umrsExecuted() {
        return umrs.get();
    }

    /** The key of the live MPT entry {@code index} ({@code mkey_index} of mlx5's commands), or -1. */
    int mptKeyOfIndex(int index) {
        assert Thread.holdsLock(dev);
        Mpt m = index > 0 && index < HcaDevice.MAX_MPT ? mpts[index] : null;
        return m == null ? -1 : m.key;
    }

    /**
     * mlx5's {@code CREATE_MKEY} for an on-demand MR (access mode MTT, translations written by
     * UMR): a key valid for [start, start+length) with the {@code PERM_*} rights whose MTT holds
     * one entry per {@code 2^pageShift}-byte page, all not present. An access to a page not present
     * (or present without the write bit, for a write) raises a {@link PageFault} instead of failing.
     */
    int sw2hwMptOnDemand(int pdn, long start, long length, int perm, int pageShift) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (pageShift < 12 || pageShift > 30 || length < 1 || start + length < start) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format(
                    "%s: on-demand mkey of %d bytes at 0x%x with pages of 2^%d bytes (need length > 0, no wrap, 12 <= shift <= 30)",
                    dev.name, length, start, pageShift));
        }
        int index = mptIndices.alloc();
        if (index < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": MPT table full (" + (HcaDevice.MAX_MPT - 1) + " entries alive)");
        }
        int key = (index << 8) | (++keyByte[index] & 0xff);
        try {
            mpts[index] = new Mpt(key, pdn, start, length, perm, pageShift);
        } catch (HwCommandException e) {
            mptIndices.free(index);
            throw e;
        }
        return key;
    }

    /**
     * {@code UMR} writing translations of an on-demand key: its MTT entries
     * {@code [first, first+n)} become {@code mtt[0..n)}, each a page-aligned IOVA of the device's
     * domain or-ed with {@link HcaDevice#MTT_READ} and/or {@link HcaDevice#MTT_WRITE}, or 0 (not present).
     */
    void umrUpdate(int key, int first, long[] mtt, int n) {
        dev.alive();
        odpMpt(key).update(first, mtt, n);
    }

    /**
     * {@code UMR} with {@code ZAP}: MTT entries {@code [first, first+n)} of an on-demand key become
     * not present. Returns when no DMA through them is in flight, so the driver may unmap their
     * IOVAs and let the pages go (what {@code mlx5_ib_invalidate_range} relies on).
     */
    void umrZap(int key, int first, int n) {
        Mpt m = mpt(key);
        if (m == null) {
            return; // the key is gone: nothing can use its translations
        }
        m.zap(first, n);
    }

    /** MTT entries present in an on-demand key (what the driver's counters show). */
    int mttPresent(int key) {
        return odpMpt(key).present();
    }

    private Mpt odpMpt(int key) {
        Mpt m = mpt(key);
        if (m == null || !m.onDemand()) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RESOURCE, String.format(
                    "%s: mkey 0x%x %s", dev.name, key, m == null ? "names no entry" : "is not an on-demand mkey"));
        }
        return m;
    }


    /** {@code HW2SW_MPT}: the key stops working; returns when no DMA through it is in flight. */
    void hw2swMpt(int key) {
        Mpt m = mpt(key);
        if (m != null) {
            m.revoke();
        }
    }

    /** Frees the entry's index (after {@link #hw2swMpt}; revokes it too if not done). */
    void freeMpt(int key) {
        assert Thread.holdsLock(dev);
        if (mpt(key) != null) {
            freeMptIndex(key >>> 8);
        }
    }

    /** Revokes the entry at {@code index} and frees the index. Caller holds the device monitor. */
    private void freeMptIndex(int index) {
        assert Thread.holdsLock(dev);
        mpts[index].revoke();
        mpts[index] = null;
        mptIndices.free(index);
    }

    /** {@link HcaDevice#keyAccess}: under the entry's read lock, as a transfer. */
    void keyAccess(int key, long va, java.lang.foreign.MemorySegment buf, long off, long len, boolean write) {
        Mpt m = mpt(key);
        if (m == null || m.indirect) {
            throw new IllegalStateException(String.format("mkey 0x%x names no direct MPT entry", key));
        }
        long stamp = m.lock.readLock();
        try {
            int perm = write ? HcaDevice.PERM_LOCAL_WRITE : HcaDevice.PERM_LOCAL_READ;
            if (m.state != Mpt.State.VALID || m.key != key) {
                throw new IllegalStateException(String.format("mkey 0x%x was revoked", key));
            }
            if ((m.access & perm) != perm || !m.contains(va, len)) {
                throw new IllegalStateException(String.format("mkey 0x%x does not admit a %s of 0x%x+%d", key, write ? "write" : "read", va, len));
            }
            while (len > 0) {
                if (!m.mapped(va, write ? Mpt.MTT_WRITE : Mpt.MTT_READ)) {
                    throw new IllegalStateException(String.format("mkey 0x%x: page of 0x%x not present", key, va));
                }
                long n = Math.min(len, m.contiguous(va));
                long iova = m.iova(va);
                if (write) {
                    m.port(dev.domain).write(iova, buf, off, n);
                } else {
                    m.port(dev.domain).read(iova, buf, off, n);
                }
                va += n;
                off += n;
                len -= n;
            }
        } finally {
            m.lock.unlockRead(stamp);
        }
    }

    /** The valid-or-revoked entry for a key, or null when the key names no entry. */
    Mpt mpt(int key) {
        int index = key >>> 8;
        if (index <= 0 || index >= HcaDevice.MAX_MPT) {
            return null;
        }
        Mpt m = mpts[index];
        return m != null && m.key == key ? m : null;
    }

    /** MPT entries alive. */
    int mptCount() {
        assert Thread.holdsLock(dev);
        return mptIndices.alive();
    }

    /** Reset: every entry revoked and its index freed. */
    void freeAll() {
        assert Thread.holdsLock(dev);
        for (int i = 0; i < mpts.length; i++) {
            if (mpts[i] != null) {
                freeMptIndex(i);
            }
        }
    }

    /** Removal: every entry revoked (later commands fail on the removed device). */
    void revokeAll() {
        assert Thread.holdsLock(dev);
        for (Mpt m : mpts) {
            if (m != null) {
                m.revoke();
            }
        }
    }
}
