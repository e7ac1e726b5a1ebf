package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.HPAGE_ORDER;
import static org.peerdirect.kernel.mm.Mm.HPAGE_SIZE;
import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * Faults and CPU access of an {@link AddressSpace}, as mm/memory.c: {@code handle_mm_fault} and
 * the page installs under the page-table lock, {@code zap_page_range}, and the loads, stores and
 * copies a process (or the kernel on its behalf) makes.
 *
 * <p>Holds no state: each method works on the {@code mm} it is given. Faults run under the mmap
 * lock in read mode and install entries under {@code mm.ptl}; they never reclaim (reclaim may need
 * this address space's mmap lock in write mode), so a fault that finds no free frame throws
 * {@link FaultRetry} and the access is retried, without locks, after {@link #reclaimForFault}.
 */
final class Memory {

    private Memory() {
    }

    // ---------------------------------------------------------------------------------- faults

    /**
     * Physical address of va for an access, faulting the page in if needed. Caller holds the mmap
     * lock. Returns -1 for device mappings (the caller accesses the device memory instead).
     */
    static long resolve(AddressSpace mm, long va, boolean write) {
        assert mm.mmapLocked();
        long e = mm.pt.lookup(va);
        long need = write ? (PageTable.PRESENT | PageTable.WRITE) : PageTable.PRESENT;
        if ((e & need) != need) {
            e = handleMmFault(mm, va, write);
            if (e == 0) {
                return -1;
            }
        }
        long want = write ? (PageTable.ACCESSED | PageTable.DIRTY) : PageTable.ACCESSED;
        if ((e & want) != want) {
            long base = (e & PageTable.HUGE) != 0 ? va & -HPAGE_SIZE : va;
            mm.pt.updateFlags(base, e, e | want); // lost race: another access set the bits
        }
        long offset = (e & PageTable.HUGE) != 0 ? va & (HPAGE_SIZE - 1) : va & (PAGE_SIZE - 1);
        return (PageTable.pfn(e) << PAGE_SHIFT) + offset;
    }

    /**
     * Checks the access against the VMA (the arch fault handler's {@code access_error}) and
     * installs the entry. Caller holds the mmap lock. Returns the entry now mapping va, or 0 for a
     * device VMA.
     *
     * @see "handle_mm_fault() in mm/memory.c"
     */
    static long handleMmFault(AddressSpace mm, long va, boolean write) {
        assert mm.mmapLocked();
        if (va < 0 || va >= PageTable.TASK_SIZE) {
            throw new SegmentationFault(va, "address outside the 128 TiB user address space");
        }
        Vma v = Mmap.findVma(mm, va);
        if (v == null) {
            throw new SegmentationFault(va, "no mapping (process " + mm.pid() + " " + mm.name() + ")");
        }
        if (write && !v.writable()) {
            throw new SegmentationFault(va, "write to a mapping without PROT_WRITE (" + v.name() + ")");
        }
        if (!write && !v.readable()) {
            throw new SegmentationFault(va, "read of a PROT_NONE mapping (" + v.name() + ")");
        }
        if (v.kind() == Vma.Kind.DEVICE) {
            return 0;
        }
        mm.faults.incrementAndGet();
        synchronized (mm.ptl) {
            return handlePteFault(mm, v, va, write);
        }
    }

    /**
     * Makes the entry of va present (and writable for a write) in VMA {@code v}, which allows the
     * access: upgrades a present entry, revives a PROT_NONE one, reads a page back from swap or
     * the file, or maps a zeroed frame. Caller holds the mmap lock and {@code mm.ptl}, so a
     * racing fault on the same page finds the entry this one installs instead of allocating a
     * second frame. Returns the entry.
     *
     * @see "handle_pte_fault() in mm/memory.c"
     */
    private static long handlePteFault(AddressSpace mm, Vma v, long va, boolean write) {
        assert Thread.holdsLock(mm.ptl) && mm.mmapLocked();
        PhysicalMemory phys = mm.phys;
        boolean huge = v.kind() == Vma.Kind.HUGETLB;
        long base = huge ? va & -HPAGE_SIZE : va & -PAGE_SIZE;
        long e = mm.pt.lookup(base);
        long flags = PageTable.PRESENT | PageTable.ACCESSED | (huge ? PageTable.HUGE : 0)
                | (v.writable() && write ? PageTable.WRITE | PageTable.DIRTY : 0);
        if ((e & PageTable.PRESENT) != 0) {
            if (write && (e & PageTable.WRITE) == 0) {
                e |= PageTable.WRITE | PageTable.DIRTY;
                mm.pt.setEntry(base, e, e);
            }
            return e;
        }
        if ((e & PageTable.PROTNONE) != 0) {
            e = (e & ~PageTable.PROTNONE) | flags;
            mm.pt.setEntry(base, e, e);
            return e;
        }
        long pfn;
        if ((e & PageTable.SWAP) != 0) {
            long slot = PageTable.pfn(e);
            pfn = allocOrRetry(mm, 0, PhysicalMemory.ANON, mm.rmap(base));
            mm.kernel.swap().read(slot, phys.frame(pfn));
            mm.kernel.swap().freeSlot(slot);
            mm.swapped.decrementAndGet();
            // the swap entry carries no DIRTY (pageout writes only SWAP and the slot): the page
            // is as clean as its copy in swap, and dirty only if this fault writes (flags)
        } else if (v.file() != null) {
            long pos = v.offsetOf(base);
            if (pos >= v.file().size()) {
                throw new SegmentationFault(va, "SIGBUS: page at file offset " + pos + " is past the end of "
                        + v.file().path() + " (" + v.file().size() + " bytes)");
            }
            pfn = allocOrRetry(mm, 0, PhysicalMemory.PAGECACHE, mm.rmap(base));
            v.file().readPage(pos, phys.frame(pfn));
        } else if (huge) {
            pfn = hugetlbNoPage(mm, v, va, base);
        } else {
            pfn = allocOrRetry(mm, 0, PhysicalMemory.ANON, mm.rmap(base));
        }
        long ne = PageTable.entry(pfn, flags);
        mm.pt.setEntry(base, ne, ne);
        mm.rss.addAndGet(huge ? 1L << HPAGE_ORDER : 1);
        return ne;
    }

    /**
     * A free 2 MiB page for a hugetlb fault, or SIGBUS at once: hugetlb pages come from their
     * pool, which reclaim does not grow, so a fault finding none free ends the access with
     * {@code VM_FAULT_SIGBUS} (a mapping made without a reservation), not with a retry after
     * reclaim: reclaim frees 4 KiB pages that need not make a free 2 MiB block, and retrying it
     * spun for minutes (issue 45: 355 M faults for a 1 GiB touch with 511 huge pages possible).
     *
     * @see "hugetlb_no_page() in mm/hugetlb.c"
     */
    private static long hugetlbNoPage(AddressSpace mm, Vma v, long va, long base) {
        long pfn = mm.phys.tryAllocPages(HPAGE_ORDER, PhysicalMemory.ANON, mm.rmap(base));
        if (pfn < 0) {
            throw SegmentationFault.sigbus(va, String.format("no free 2 MiB huge page for %s at 0x%x (HugePages_InUse %d of %d): "
                    + "the hugetlb fault fails (VM_FAULT_SIGBUS); free huge pages or map fewer", v.name(), base,
                    mm.phys.hugePagesInUse(), mm.phys.totalBytes() / HPAGE_SIZE));
        }
        return pfn;
    }

    /**
     * Thrown inside a fault when no frame is free: like VM_FAULT_RETRY, the caller drops the mmap
     * lock, lets reclaim run (it may need this address space's lock) and retries the access.
     */
    static final class FaultRetry extends RuntimeException {
        private static final long serialVersionUID = 1L;
        static final FaultRetry INSTANCE = new FaultRetry();

        private FaultRetry() {
            super("retry the fault after reclaim", null, false, false);
        }
    }

    /** A frame for a fault, without reclaim (the mmap lock is held): FaultRetry when none is free. */
    private static long allocOrRetry(AddressSpace mm, int order, int kind, long rmap) {
        long pfn = mm.phys.tryAllocPages(order, kind, rmap);
        if (pfn < 0) {
            throw FaultRetry.INSTANCE;
        }
        return pfn;
    }

    /**
     * Called with no lock held after a FaultRetry: reclaims, or fails with ENOMEM if nothing can
     * be freed.
     */
    static void reclaimForFault(AddressSpace mm) {
        assert !Thread.holdsLock(mm.ptl);
        if (mm.kernel.reclaim(64) == 0 && mm.phys.freeFrames() == 0) {
            throw new KernelException(Errno.ENOMEM, "out of memory: no free frame for a fault in " + mm
                    + " and nothing reclaimable (pinned pages cannot be reclaimed; swap may be full)");
        }
    }

    /**
     * Runs {@code op} under the mmap read lock; when a fault inside it finds no free frame, drops
     * the lock, reclaims and runs {@code op} again from the start (so {@code op} must be safe to
     * repeat).
     */
    static void withFaultRetry(AddressSpace mm, Runnable op) {
        for (;;) {
            long stamp = mm.mmapLock.readLock();
            try {
                op.run();
                return;
            } catch (FaultRetry retry) {
                // fall through: reclaim without the lock, then retry
            } finally {
                mm.mmapLock.unlockRead(stamp);
            }
            reclaimForFault(mm);
        }
    }

    /**
     * Removes every entry of a VMA part; frees frames and swap slots, writing dirty file pages
     * back first. Caller holds write. Returns the entries removed.
     *
     * @see "zap_page_range_single() in mm/memory.c"
     */
    static long zapPageRange(AddressSpace mm, Vma v) {
        assert mm.mmapLock.isWriteLocked();
        PhysicalMemory phys = mm.phys;
        long[] n = {0};
        mm.pt.forEachEntry(v.start(), v.end(), (va, e) -> {
            mm.pt.setEntry(va, e, 0);
            if ((e & PageTable.SWAP) != 0) {
                mm.kernel.swap().freeSlot(PageTable.pfn(e));
                mm.swapped.decrementAndGet();
            } else {
                int order = (e & PageTable.HUGE) != 0 ? HPAGE_ORDER : 0;
                if (v.file() != null && (e & PageTable.DIRTY) != 0) {
                    v.file().writePage(v.offsetOf(va), phys.frame(PageTable.pfn(e)));
                }
                phys.setRmap(PageTable.pfn(e), 0);
                mm.kernel.releaseIfUnused(PageTable.pfn(e));
                mm.rss.addAndGet(-(1L << order));
            }
            n[0]++;
        });
        return n[0];
    }

    // ---------------------------------------------------------------------------------- CPU access

    private static Vma deviceVma(AddressSpace mm, long va) {
        Vma v = Mmap.findVma(mm, va);
        if (v == null || v.kind() != Vma.Kind.DEVICE) {
            throw new SegmentationFault(va, "no mapping");
        }
        return v;
    }

    /** @see AddressSpace#readLong */
    static long readLong(AddressSpace mm, long va) {
        if ((va & (PAGE_SIZE - 1)) > PAGE_SIZE - 8) {
            byte[] b = new byte[8];
            bulk(mm, va, MemorySegment.ofArray(b), 0, 8, false);
            return ByteBuffer.wrap(b).order(ByteOrder.nativeOrder()).getLong();
        }
        return scalar(mm, va, true, false, 0);
    }

    /** @see AddressSpace#writeLong */
    static void writeLong(AddressSpace mm, long va, long value) {
        if ((va & (PAGE_SIZE - 1)) > PAGE_SIZE - 8) {
            byte[] b = new byte[8];
            ByteBuffer.wrap(b).order(ByteOrder.nativeOrder()).putLong(value);
            bulk(mm, va, MemorySegment.ofArray(b), 0, 8, true);
            return;
        }
        scalar(mm, va, true, true, value);
    }

    /**
     * One CPU load or store of a byte or (within a page) a long, into RAM or a device mapping.
     * Written out rather than through {@link #withFaultRetry} so the per-access path allocates nothing.
     */
    static long scalar(AddressSpace mm, long va, boolean wide, boolean write, long value) {
        for (;;) {
            long stamp = mm.mmapLock.readLock();
            try {
                long pa = resolve(mm, va, write);
                MemorySegment seg = mm.memory;
                if (pa < 0) {
                    Vma v = deviceVma(mm, va);
                    seg = v.device();
                    pa = v.offsetOf(va);
                }
                if (wide) {
                    if (!write) {
                        return seg.get(ValueLayout.JAVA_LONG_UNALIGNED, pa);
                    }
                    seg.set(ValueLayout.JAVA_LONG_UNALIGNED, pa, value);
                } else {
                    if (!write) {
                        return seg.get(ValueLayout.JAVA_BYTE, pa);
                    }
                    seg.set(ValueLayout.JAVA_BYTE, pa, (byte) value);
                }
                return 0;
            } catch (FaultRetry retry) {
                // fall through: reclaim without the lock, then retry
            } finally {
                mm.mmapLock.unlockRead(stamp);
            }
            reclaimForFault(mm);
        }
    }

    /**
     * Copies {@code len} bytes between user memory at va and {@code seg} at {@code segOff}: into
     * user memory when {@code toUser}, out of it otherwise. RAM is copied a page (or huge page) at
     * a time, device memory up to the end of its VMA.
     *
     * @see "__access_remote_vm() in mm/memory.c"
     */
    static void bulk(AddressSpace mm, long va, MemorySegment seg, long segOff, long len, boolean toUser) {
        if (len < 0 || segOff < 0 || segOff + len > seg.byteSize()) {
            throw new KernelException(Errno.EINVAL, "buffer range " + segOff + "+" + len + " outside a " + seg.byteSize() + "-byte buffer");
        }
        if (va < 0 || va + len < va) {
            throw new SegmentationFault(va, "range overflows");
        }
        withFaultRetry(mm, () -> {
            long done = 0;
            while (done < len) {
                long cur = va + done;
                long pa = resolve(mm, cur, toUser);
                long n;
                if (pa < 0) {
                    Vma v = deviceVma(mm, cur);
                    n = Math.min(len - done, v.end() - cur);
                    long devOff = v.offsetOf(cur);
                    if (toUser) {
                        MemorySegment.copy(seg, segOff + done, v.device(), devOff, n);
                    } else {
                        MemorySegment.copy(v.device(), devOff, seg, segOff + done, n);
                    }
                } else {
                    long pageEnd = (mm.pt.lookup(cur) & PageTable.HUGE) != 0 ? (cur & -HPAGE_SIZE) + HPAGE_SIZE
                            : (cur & -PAGE_SIZE) + PAGE_SIZE;
                    n = Math.min(len - done, pageEnd - cur);
                    if (toUser) {
                        MemorySegment.copy(seg, segOff + done, mm.memory, pa, n);
                    } else {
                        MemorySegment.copy(mm.memory, pa, seg, segOff + done, n);
                    }
                }
                done += n;
            }
        });
    }

    /**
     * @see AddressSpace#populate
     * @see "madvise(MADV_POPULATE_READ/WRITE) in mm/madvise.c: EINVAL when start + len wraps"
     */
    static void populate(AddressSpace mm, long va, long len, boolean write) {
        if (len < 0) {
            throw new KernelException(Errno.EINVAL, String.format("populate: length %d at 0x%x is negative", len, va));
        }
        if (va < 0 || va + len < va) {
            // a negative va is past the top of the unsigned address space: va + len wraps
            throw new KernelException(Errno.EINVAL, String.format("populate: range 0x%x + %d overflows the address space", va, len));
        }
        withFaultRetry(mm, () -> {
            for (long p = va & -PAGE_SIZE; p < va + len; p += PAGE_SIZE) {
                resolve(mm, p, write);
            }
        });
    }
}
