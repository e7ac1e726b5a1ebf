package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.HPAGE_ORDER;
import static org.peerdirect.kernel.mm.Mm.HPAGE_SIZE;
import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * A simulated process's address space ({@code struct mm_struct}): VMAs, a 4-level page table,
 * CPU access with demand faults, pinning, MMU interval notifiers and {@code hmm_range_fault}.
 *
 * <p>Locks, in order:
 * <ol>
 * <li>{@code mmapLock} ({@code mmap_lock}): write for changes of VMAs and for removing or
 * changing present entries (munmap, mprotect, madvise, migration, reclaim, exit); read for CPU
 * access, faults, pinning and HMM walks. Notifier callbacks run with it held in write mode.</li>
 * <li>{@code ptl} (the page-table lock): held by faults, under the read lock, to install entries,
 * so two faulting threads do not both allocate a frame for the same page.</li>
 * <li>the physical allocator lock, inside either.</li>
 * </ol>
 * Invariant: a frame mapped by a present entry is allocated and its rmap names this address space
 * and page; frames are freed only when unmapped and unpinned.
 */
public final class AddressSpace {

    /** Lowest address mmap picks without a hint (like mmap_min_addr + a gap). */
    static final long MMAP_BASE = 0x10000000L;
    private static final long PROTNONE = 1L << 6;

    private final Mm mm;
    private final int pid;
    private final String name;
    private final StampedLock mmapLock = new StampedLock();
    private final Object ptl = new Object();
    /** Guarded by mmapLock (write to change, read to look up). */
    private final TreeMap<Long, Vma> vmas = new TreeMap<>();
    private final PageTable pt = new PageTable();
    private final MmuNotifierSubscriptions notifiers = new MmuNotifierSubscriptions();
    private final PhysicalMemory phys;
    private final MemorySegment memory;
    private final AtomicLong rss = new AtomicLong();
    private final AtomicLong swapped = new AtomicLong();
    private final AtomicLong pinnedVm = new AtomicLong();
    private final AtomicLong faults = new AtomicLong();
    private volatile long memlockLimitPages;
    private volatile boolean dead;

    AddressSpace(Mm mm, int pid, String name, long memlockLimitBytes) {
        this.mm = mm;
        this.pid = pid;
        this.name = name;
        this.phys = PhysicalMemory.of(mm);
        this.memory = phys.memory();
        this.memlockLimitPages = memlockLimitBytes >>> PAGE_SHIFT;
    }

    public int pid() {
        return pid;
    }

    public String name() {
        return name;
    }

    MmuNotifierSubscriptions notifiers() {
        return notifiers;
    }

    private long rmap(long va) {
        return ((long) pid << 36) | (va >>> PAGE_SHIFT);
    }

    // ---------------------------------------------------------------------------------- checks

    private void alive() {
        if (dead) {
            throw new KernelException(Errno.EFAULT, "process " + pid + " (" + name + ") has exited");
        }
    }

    private static long checkRange(long addr, long len, long align, String what) {
        if (len <= 0) {
            throw new KernelException(Errno.EINVAL, what + ": length " + len + " must be positive");
        }
        if ((addr & (align - 1)) != 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: address 0x%x is not aligned to %d", what, addr, align));
        }
        long rounded = (len + align - 1) & -align;
        if (rounded < len || addr < 0 || addr + rounded < addr || addr + rounded > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.EOVERFLOW, String.format("%s: range 0x%x + %d leaves the 128 TiB address space", what, addr, len));
        }
        return rounded;
    }

    // ---------------------------------------------------------------------------------- mmap

    /**
     * {@code mmap(MAP_PRIVATE|MAP_ANONYMOUS)}, or with {@link Vma.Kind#HUGETLB} 2 MiB pages. A
     * zero address picks a free range; a non-zero one is {@code MAP_FIXED_NOREPLACE}. The length
     * is rounded up to the page size.
     *
     * @return the start address
     */
    public long mmap(long addr, long length, int prot, Vma.Kind kind, String name) {
        if (kind == Vma.Kind.DEVICE) {
            throw new KernelException(Errno.EINVAL, "device mappings are made with mmapDevice");
        }
        return insertVma(addr, length, prot, kind, name, null, null, 0);
    }

    /** Shorthand: anonymous read/write memory anywhere. */
    public long mmap(long length) {
        return mmap(0, length, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.ANON, "[anon]");
    }

    /**
     * Maps device memory (a GPU BAR window, an SSD memory window) into the process with
     * {@code VM_IO | VM_PFNMAP}: the CPU reads and writes {@code device}; {@code pin_user_pages}
     * and HMM refuse the range, so registration falls back to peer memory.
     */
    public long mmapDevice(long addr, MemorySegment device, int prot, String name) {
        return mmapDevice(addr, java.util.Collections.singletonList(device), prot, name);
    }

    /**
     * Maps device memory made of several pieces (for instance frames a driver allocated in
     * blocks) at consecutive addresses, atomically: one device VMA per piece, so the range is
     * one contiguous user mapping. Returns the start address.
     */
    public long mmapDevice(long addr, List<MemorySegment> pieces, int prot, String name) {
        if (pieces.isEmpty()) {
            throw new KernelException(Errno.EINVAL, "mmap of device memory: no pieces");
        }
        long total = 0;
        for (MemorySegment p : pieces) {
            if (p == null || p.byteSize() == 0 || p.byteSize() % PAGE_SIZE != 0) {
                throw new KernelException(Errno.EINVAL, "device memory must be non-empty multiples of 4096 bytes");
            }
            total += p.byteSize();
        }
        return insertVmas(addr, total, PAGE_SIZE, prot, (start, len) -> {
            List<Vma> out = new ArrayList<>();
            long at = start;
            for (MemorySegment p : pieces) {
                out.add(new Vma(at, at + p.byteSize(), prot, Vma.Kind.DEVICE, name, p, null, 0));
                at += p.byteSize();
            }
            return out;
        });
    }

    /**
     * {@code mmap(MAP_SHARED)} of a real file from {@code offset} (page aligned): faults read the
     * file, dirty pages are written back by {@link #msync}, munmap, page-out, reclaim and exit. A
     * page wholly past the end of the file cannot be touched (SIGBUS, reported as a
     * {@link SegmentationFault}). Writable long-term pins of such mappings are refused, as Linux 6.5+
     * refuses {@code FOLL_LONGTERM | FOLL_WRITE} on file-backed memory.
     */
    public long mmapFile(long addr, Path path, long offset, long length, int prot, String name) {
        if (offset < 0 || (offset & (PAGE_SIZE - 1)) != 0) {
            throw new KernelException(Errno.EINVAL, "mmap of " + path + ": offset " + offset + " is not page aligned");
        }
        MappedFile f = new MappedFile(path, (prot & Vma.PROT_WRITE) != 0);
        try {
            return insertVma(addr, length, prot, Vma.Kind.FILE, name != null ? name : path.toString(), null, f, offset);
        } catch (RuntimeException e) {
            f.close();
            throw e;
        }
    }

    private long insertVma(long addr, long length, int prot, Vma.Kind kind, String vname, MemorySegment device,
            MappedFile file, long offset) {
        long align = kind == Vma.Kind.HUGETLB ? HPAGE_SIZE : PAGE_SIZE;
        return insertVmas(addr, length, align, prot, (start, len) -> List.of(new Vma(start, start + len, prot, kind, vname, device, file, offset)));
    }

    /**
     * {@code mmap}'s common part: checks, picks or checks the address, and inserts the VMAs
     * {@code make} builds for [start, start+len) under the mmap lock in write mode.
     */
    private long insertVmas(long addr, long length, long align, int prot, java.util.function.BiFunction<Long, Long, List<Vma>> make) {
        if ((prot & ~(Vma.PROT_READ | Vma.PROT_WRITE)) != 0) {
            throw new KernelException(Errno.EINVAL, "unknown protection bits 0x" + Integer.toHexString(prot));
        }
        long len = checkRange(addr, length, align, "mmap");
        long stamp = mmapLock.writeLock();
        try {
            alive();
            long start = addr != 0 ? addr : findFree(len, align);
            if (overlapsVma(start, start + len)) {
                throw new KernelException(Errno.EINVAL, String.format("mmap: 0x%x-0x%x overlaps an existing mapping", start, start + len));
            }
            for (Vma v : make.apply(start, len)) {
                vmas.put(v.start(), v);
            }
            return start;
        } finally {
            mmapLock.unlockWrite(stamp);
        }
    }

    private long findFree(long len, long align) {
        long cur = MMAP_BASE;
        for (Vma v : vmas.values()) {
            if (v.end() <= cur) {
                continue;
            }
            if (v.start() >= cur + len) {
                break;
            }
            cur = (v.end() + align - 1) & -align;
        }
        if (cur + len > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.ENOMEM, "mmap: no free range of " + len + " bytes");
        }
        return cur;
    }

    private boolean overlapsVma(long start, long end) {
        Map.Entry<Long, Vma> e = vmas.lowerEntry(end);
        return e != null && e.getValue().end() > start;
    }

    private Vma findVma(long va) {
        Map.Entry<Long, Vma> e = vmas.floorEntry(va);
        return e != null && e.getValue().end() > va ? e.getValue() : null;
    }

    /** VMAs intersecting [start, end), clipped. Caller holds the mmap lock. */
    private List<Vma> vmasIn(long start, long end) {
        List<Vma> out = new ArrayList<>();
        Map.Entry<Long, Vma> first = vmas.floorEntry(start);
        Long from = first != null && first.getValue().end() > start ? first.getKey() : start;
        for (Vma v : vmas.subMap(from, true, end, false).values()) {
            out.add(v.slice(Math.max(start, v.start()), Math.min(end, v.end())));
        }
        return out;
    }

    /** Replaces the parts of VMAs inside [start, end) by {@code replace} (null removes). Caller holds write. */
    private void splitReplace(long start, long end, java.util.function.UnaryOperator<Vma> replace) {
        for (Vma v : vmasIn(start, end)) {
            Vma whole = findVma(v.start());
            vmas.remove(whole.start());
            if (whole.start() < v.start()) {
                vmas.put(whole.start(), whole.slice(whole.start(), v.start()));
            }
            if (v.end() < whole.end()) {
                vmas.put(v.end(), whole.slice(v.end(), whole.end()));
            }
            Vma r = replace.apply(v);
            if (r != null) {
                vmas.put(r.start(), r);
            }
        }
        mergeAround(start, end);
    }

    /** {@code vma_merge}: joins touching VMAs with equal attributes around [start, end). */
    private void mergeAround(long start, long end) {
        Map.Entry<Long, Vma> e = vmas.floorEntry(Math.max(0, start - 1));
        if (e == null) {
            e = vmas.ceilingEntry(start);
        }
        while (e != null && e.getKey() <= end) {
            Map.Entry<Long, Vma> next = vmas.higherEntry(e.getKey());
            Vma a = e.getValue();
            if (next != null && a.canMerge(next.getValue())) {
                vmas.remove(next.getKey());
                vmas.put(a.start(), a.mergedWith(next.getValue()));
                e = vmas.floorEntry(a.start());
            } else {
                e = next;
            }
        }
    }

    // ---------------------------------------------------------------------------------- munmap & co

    /**
     * {@code munmap}: notifiers see UNMAP before any entry changes; frames are freed (or, if
     * pinned, freed at unpin). Unlike Linux, a range with no mapping at all is an error here.
     */
    public void munmap(long addr, long length) {
        long len = checkRange(addr, length, PAGE_SIZE, "munmap");
        long stamp = mmapLock.writeLock();
        try {
            alive();
            List<Vma> in = vmasIn(addr, addr + len);
            if (in.isEmpty()) {
                throw new KernelException(Errno.EINVAL, String.format("munmap: nothing is mapped in 0x%x-0x%x", addr, addr + len));
            }
            for (Vma v : in) {
                if (v.kind() == Vma.Kind.HUGETLB && ((v.start() | v.end()) & (HPAGE_SIZE - 1)) != 0) {
                    throw new KernelException(Errno.EINVAL, String.format(
                            "munmap: 0x%x-0x%x splits a 2 MiB huge page of %s", addr, addr + len, v.name()));
                }
            }
            invalidate(addr, addr + len, MmuNotifierEvent.UNMAP, () -> {
                for (Vma v : in) {
                    zap(v);
                }
                splitReplace(addr, addr + len, v -> null);
            });
            for (Vma v : in) {
                if (v.file() != null && vmas.values().stream().noneMatch(o -> o.file() == v.file())) {
                    v.file().close();
                }
            }
        } finally {
            mmapLock.unlockWrite(stamp);
        }
    }

    /** {@code mprotect}: the whole range must be mapped; notifiers see PROTECTION_VMA first. */
    public void mprotect(long addr, long length, int prot) {
        if ((prot & ~(Vma.PROT_READ | Vma.PROT_WRITE)) != 0) {
            throw new KernelException(Errno.EINVAL, "unknown protection bits 0x" + Integer.toHexString(prot));
        }
        onMappedRange(addr, length, "mprotect", (start, end) -> {
            invalidate(start, end, MmuNotifierEvent.PROTECTION_VMA, () -> {
                for (Vma v : vmasIn(start, end)) {
                    forEachEntry(v.start(), v.end(), (va, e) -> {
                        if ((e & (PageTable.PRESENT | PROTNONE)) == 0) {
                            return;
                        }
                        long ne = e & ~(PageTable.WRITE | PageTable.PRESENT | PROTNONE);
                        ne |= prot == Vma.PROT_NONE ? PROTNONE : PageTable.PRESENT;
                        // write permission comes back at the next write fault, with the dirty bit
                        setEntry(va, e, ne);
                    });
                }
                splitReplace(start, end, v -> v.withProt(prot));
            });
            return 0;
        });
    }

    @FunctionalInterface
    private interface RangeOp {
        long apply(long start, long end);
    }

    /**
     * The frame of mprotect, madvise, migrate and msync: checks the range, takes the mmap write
     * lock, requires [addr, addr+length) to be wholly mapped (ENOMEM otherwise, as Linux) and runs
     * {@code op} on the page-rounded range.
     */
    private long onMappedRange(long addr, long length, String what, RangeOp op) {
        long len = checkRange(addr, length, PAGE_SIZE, what);
        long stamp = mmapLock.writeLock();
        try {
            alive();
            requireMapped(addr, addr + len, what);
            return op.apply(addr, addr + len);
        } finally {
            mmapLock.unlockWrite(stamp);
        }
    }

    private void requireMapped(long start, long end, String what) {
        long cur = start;
        for (Vma v : vmasIn(start, end)) {
            if (v.start() > cur) {
                break;
            }
            cur = v.end();
        }
        if (cur < end) {
            throw new KernelException(Errno.ENOMEM, String.format("%s: 0x%x-0x%x is not mapped", what, cur, end));
        }
    }

    /** Advice for {@link #madvise}. */
    public enum Advice {
        /** drop the pages: the next touch sees zeroes (anonymous memory). */
        MADV_DONTNEED,
        /** reclaim the pages now: they go to swap and fault back in with their contents. */
        MADV_PAGEOUT
    }

    /** {@code madvise}; returns the number of pages dropped or paged out (pinned pages stay). */
    public long madvise(long addr, long length, Advice advice) {
        return onMappedRange(addr, length, "madvise", (start, end) -> {
            long[] n = {0};
            invalidate(start, end, MmuNotifierEvent.CLEAR, () -> {
                for (Vma v : vmasIn(start, end)) {
                    if (v.kind() == Vma.Kind.DEVICE) {
                        throw new KernelException(Errno.EINVAL, "madvise on device mapping " + v.name());
                    }
                    if (advice == Advice.MADV_DONTNEED) {
                        n[0] += zap(v);
                    } else if (v.kind() != Vma.Kind.HUGETLB) {
                        n[0] += pageout(v, Long.MAX_VALUE);
                    }
                }
            });
            return n[0];
        });
    }

    /** Runs {@code change} between invalidate_range_start and _end. Caller holds the write lock. */
    private void invalidate(long start, long end, MmuNotifierEvent event, Runnable change) {
        notifiers.start(new MmuNotifierRange(this, start, end, event));
        try {
            change.run();
        } finally {
            notifiers.end();
        }
    }

    @FunctionalInterface
    private interface EntryVisitor {
        void visit(long va, long entry);
    }

    /** Visits non-empty entries of [start, end) (2 MiB leaves once, at their base). Skips empty tables. */
    private void forEachEntry(long start, long end, EntryVisitor visitor) {
        long va = start;
        while (va < end) {
            if (!pt.hasRegion(va)) {
                va = (va & -HPAGE_SIZE) + HPAGE_SIZE;
                continue;
            }
            long e = pt.lookup(va);
            if ((e & PageTable.HUGE) != 0) {
                visitor.visit(va & -HPAGE_SIZE, e);
                va = (va & -HPAGE_SIZE) + HPAGE_SIZE;
                continue;
            }
            if (e != 0) {
                visitor.visit(va, e);
            }
            va += PAGE_SIZE;
        }
    }

    private void setEntry(long va, long old, long now) {
        if ((old & PageTable.HUGE) != 0) {
            pt.setHuge(va, now);
        } else {
            pt.setPte(va, now);
        }
    }

    /** Removes every entry of a VMA part; frees frames and swap slots. Caller holds write. */
    private long zap(Vma v) {
        long[] n = {0};
        forEachEntry(v.start(), v.end(), (va, e) -> {
            setEntry(va, e, 0);
            if ((e & PageTable.SWAP) != 0) {
                mm.swap().freeSlot(PageTable.pfn(e));
                swapped.decrementAndGet();
            } else {
                int order = (e & PageTable.HUGE) != 0 ? HPAGE_ORDER : 0;
                if (v.file() != null && (e & PageTable.DIRTY) != 0) {
                    v.file().writePage(v.offsetOf(va), phys.frame(PageTable.pfn(e)));
                }
                phys.setRmap(PageTable.pfn(e), 0);
                mm.releaseIfUnused(PageTable.pfn(e));
                rss.addAndGet(-(1L << order));
            }
            n[0]++;
        });
        return n[0];
    }

    /**
     * Reclaims present, unpinned 4 KiB pages of a VMA part, at most {@code max}: anonymous pages
     * go to swap, file pages are written back if dirty and dropped. Caller holds write.
     */
    long pageout(Vma v, long max) {
        long[] n = {0};
        forEachEntry(v.start(), v.end(), (va, e) -> {
            if (n[0] >= max || (e & PageTable.PRESENT) == 0 || (e & PageTable.HUGE) != 0) {
                return;
            }
            long pfn = PageTable.pfn(e);
            if (phys.pinCount(pfn) != 0) {
                return; // pinned pages are never reclaimed
            }
            if (v.file() != null) {
                if ((e & PageTable.DIRTY) != 0) {
                    v.file().writePage(v.offsetOf(va), phys.frame(pfn));
                }
                pt.setPte(va, 0);
            } else {
                long slot = mm.swap().allocSlot();
                if (slot < 0) {
                    return;
                }
                mm.swap().write(slot, phys.frame(pfn));
                pt.setPte(va, PageTable.entry(slot, PageTable.SWAP));
                swapped.incrementAndGet();
            }
            phys.setRmap(pfn, 0);
            mm.releaseIfUnused(pfn);
            rss.decrementAndGet();
            n[0]++;
        });
        return n[0];
    }

    /** Reclaim entry point: swaps out up to {@code max} pages if the mmap lock is free now. */
    long tryReclaim(long max) {
        long stamp = mmapLock.tryWriteLock();
        if (stamp == 0) {
            return 0;
        }
        try {
            if (dead) {
                return 0;
            }
            long n = 0;
            for (Vma v : new ArrayList<>(vmas.values())) {
                if (n >= max) {
                    break;
                }
                if (v.kind() == Vma.Kind.ANON || v.kind() == Vma.Kind.FILE) {
                    long want = max - n;
                    long[] got = {0};
                    invalidate(v.start(), v.end(), MmuNotifierEvent.CLEAR, () -> got[0] = pageout(v, want));
                    n += got[0];
                }
            }
            return n;
        } finally {
            mmapLock.unlockWrite(stamp);
        }
    }

    /**
     * Moves the present, unpinned 4 KiB pages of a range to other frames (as compaction or NUMA
     * balancing would); notifiers see MIGRATE first. Returns pages moved; pinned pages stay.
     */
    public long migrate(long addr, long length) {
        return onMappedRange(addr, length, "migrate", (start, end) -> {
            long[] n = {0};
            invalidate(start, end, MmuNotifierEvent.MIGRATE, () -> forEachEntry(start, end, (va, e) -> {
                if ((e & PageTable.PRESENT) == 0 || (e & PageTable.HUGE) != 0) {
                    return;
                }
                long old = PageTable.pfn(e);
                if (phys.pinCount(old) != 0) {
                    return;
                }
                long nu = phys.allocPages(0, phys.kind(old), rmap(va));
                MemorySegment.copy(phys.frame(old), 0, phys.frame(nu), 0, PAGE_SIZE);
                pt.setPte(va, PageTable.entry(nu, e & PageTable.FLAGS_MASK));
                phys.setRmap(old, 0);
                mm.releaseIfUnused(old);
                n[0]++;
            }));
            return n[0];
        });
    }

    // ---------------------------------------------------------------------------------- faults

    /**
     * Physical address of va for an access, faulting the page in if needed. Caller holds the read
     * lock. Returns -1 for device mappings (the caller accesses the device memory instead).
     */
    private long resolve(long va, boolean write) {
        long e = pt.lookup(va);
        long need = write ? (PageTable.PRESENT | PageTable.WRITE) : PageTable.PRESENT;
        if ((e & need) != need) {
            e = handleMmFault(va, write);
            if (e == 0) {
                return -1;
            }
        }
        long want = write ? (PageTable.ACCESSED | PageTable.DIRTY) : PageTable.ACCESSED;
        if ((e & want) != want) {
            long base = (e & PageTable.HUGE) != 0 ? va & -HPAGE_SIZE : va;
            pt.updateFlags(base, e, e | want); // lost race: another access set the bits
        }
        long offset = (e & PageTable.HUGE) != 0 ? va & (HPAGE_SIZE - 1) : va & (PAGE_SIZE - 1);
        return (PageTable.pfn(e) << PAGE_SHIFT) + offset;
    }

    /** {@code handle_mm_fault}. Caller holds the read lock. Returns the entry now mapping va, or 0 for a device VMA. */
    private long handleMmFault(long va, boolean write) {
        if (va < 0 || va >= PageTable.TASK_SIZE) {
            throw new SegmentationFault(va, "address outside the 128 TiB user address space");
        }
        Vma v = findVma(va);
        if (v == null) {
            throw new SegmentationFault(va, "no mapping (process " + pid + " " + name + ")");
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
        faults.incrementAndGet();
        synchronized (ptl) {
            boolean huge = v.kind() == Vma.Kind.HUGETLB;
            long base = huge ? va & -HPAGE_SIZE : va & -PAGE_SIZE;
            long e = pt.lookup(base);
            long flags = PageTable.PRESENT | PageTable.ACCESSED | (huge ? PageTable.HUGE : 0)
                    | (v.writable() && write ? PageTable.WRITE | PageTable.DIRTY : 0);
            if ((e & PageTable.PRESENT) != 0) {
                if (write && (e & PageTable.WRITE) == 0) {
                    e |= PageTable.WRITE | PageTable.DIRTY;
                    setEntry(base, e, e);
                }
                return e;
            }
            if ((e & PROTNONE) != 0) {
                e = (e & ~PROTNONE) | flags;
                setEntry(base, e, e);
                return e;
            }
            long pfn;
            if ((e & PageTable.SWAP) != 0) {
                long slot = PageTable.pfn(e);
                pfn = allocOrRetry(0, PhysicalMemory.ANON, rmap(base));
                mm.swap().read(slot, phys.frame(pfn));
                mm.swap().freeSlot(slot);
                swapped.decrementAndGet();
                flags |= e & PageTable.DIRTY;
            } else if (v.file() != null) {
                long pos = v.offsetOf(base);
                if (pos >= v.file().size()) {
                    throw new SegmentationFault(va, "SIGBUS: page at file offset " + pos + " is past the end of "
                            + v.file().path() + " (" + v.file().size() + " bytes)");
                }
                pfn = allocOrRetry(0, PhysicalMemory.PAGECACHE, rmap(base));
                v.file().readPage(pos, phys.frame(pfn));
            } else {
                pfn = allocOrRetry(huge ? HPAGE_ORDER : 0, PhysicalMemory.ANON, rmap(base));
            }
            long ne = PageTable.entry(pfn, flags);
            setEntry(base, ne, ne);
            rss.addAndGet(huge ? 1L << HPAGE_ORDER : 1);
            return ne;
        }
    }

    /**
     * Thrown inside a fault when no frame is free: like VM_FAULT_RETRY, the caller drops the mmap
     * lock, lets reclaim run (it may need this address space's lock) and retries the access.
     */
    private static final class FaultRetry extends RuntimeException {
        private static final long serialVersionUID = 1L;
        static final FaultRetry INSTANCE = new FaultRetry();

        private FaultRetry() {
            super("retry the fault after reclaim", null, false, false);
        }
    }

    private long allocOrRetry(int order, int kind, long rmap) {
        long pfn = phys.tryAllocPages(order, kind, rmap);
        if (pfn < 0) {
            throw FaultRetry.INSTANCE;
        }
        return pfn;
    }

    /** Called with no lock held after a FaultRetry: reclaims, or fails with ENOMEM if nothing can be freed. */
    private void reclaimForFault() {
        if (mm.reclaim(64) == 0 && phys.freeFrames() == 0) {
            throw new KernelException(Errno.ENOMEM, "out of memory: no free frame for a fault in " + this
                    + " and nothing reclaimable (pinned pages cannot be reclaimed; swap may be full)");
        }
    }

    // ---------------------------------------------------------------------------------- CPU access

    private Vma deviceVma(long va) {
        Vma v = findVma(va);
        if (v == null || v.kind() != Vma.Kind.DEVICE) {
            throw new SegmentationFault(va, "no mapping");
        }
        return v;
    }

    public long readLong(long va) {
        if ((va & (PAGE_SIZE - 1)) > PAGE_SIZE - 8) {
            byte[] b = new byte[8];
            read(va, b, 0, 8);
            return java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.nativeOrder()).getLong();
        }
        return scalar(va, true, false, 0);
    }

    public void writeLong(long va, long value) {
        if ((va & (PAGE_SIZE - 1)) > PAGE_SIZE - 8) {
            byte[] b = new byte[8];
            java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.nativeOrder()).putLong(value);
            write(va, b, 0, 8);
            return;
        }
        scalar(va, true, true, value);
    }

    public byte readByte(long va) {
        return (byte) scalar(va, false, false, 0);
    }

    public void writeByte(long va, byte value) {
        scalar(va, false, true, value);
    }

    /**
     * One CPU load or store of a byte or (within a page) a long, into RAM or a device mapping.
     * Written out rather than through {@link #withFaultRetry} so the per-access path allocates nothing.
     */
    private long scalar(long va, boolean wide, boolean write, long value) {
        for (;;) {
            long stamp = mmapLock.readLock();
            try {
                long pa = resolve(va, write);
                MemorySegment seg = memory;
                if (pa < 0) {
                    Vma v = deviceVma(va);
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
                mmapLock.unlockRead(stamp);
            }
            reclaimForFault();
        }
    }

    /**
     * Runs {@code op} under the mmap read lock; when a fault inside it finds no free frame, drops
     * the lock, reclaims and runs {@code op} again from the start (so {@code op} must be safe to
     * repeat).
     */
    private void withFaultRetry(Runnable op) {
        for (;;) {
            long stamp = mmapLock.readLock();
            try {
                op.run();
                return;
            } catch (FaultRetry retry) {
                // fall through: reclaim without the lock, then retry
            } finally {
                mmapLock.unlockRead(stamp);
            }
            reclaimForFault();
        }
    }

    /** Copies {@code len} bytes from user memory at va into {@code dst} (copy_from_user). */
    public void copyOut(long va, MemorySegment dst, long dstOffset, long len) {
        bulk(va, dst, dstOffset, len, false);
    }

    /** Copies {@code len} bytes from {@code src} into user memory at va (copy_to_user). */
    public void copyIn(long va, MemorySegment src, long srcOffset, long len) {
        bulk(va, src, srcOffset, len, true);
    }

    public void read(long va, byte[] dst, int off, int len) {
        bulk(va, MemorySegment.ofArray(dst), off, len, false);
    }

    public void write(long va, byte[] src, int off, int len) {
        bulk(va, MemorySegment.ofArray(src), off, len, true);
    }

    private void bulk(long va, MemorySegment seg, long segOff, long len, boolean toUser) {
        if (len < 0 || segOff < 0 || segOff + len > seg.byteSize()) {
            throw new KernelException(Errno.EINVAL, "buffer range " + segOff + "+" + len + " outside a " + seg.byteSize() + "-byte buffer");
        }
        if (va < 0 || va + len < va) {
            throw new SegmentationFault(va, "range overflows");
        }
        withFaultRetry(() -> {
            long done = 0;
            while (done < len) {
                long cur = va + done;
                long pa = resolve(cur, toUser);
                long n;
                if (pa < 0) {
                    Vma v = deviceVma(cur);
                    n = Math.min(len - done, v.end() - cur);
                    long devOff = v.offsetOf(cur);
                    if (toUser) {
                        MemorySegment.copy(seg, segOff + done, v.device(), devOff, n);
                    } else {
                        MemorySegment.copy(v.device(), devOff, seg, segOff + done, n);
                    }
                } else {
                    long pageEnd = (pt.lookup(cur) & PageTable.HUGE) != 0 ? (cur & -HPAGE_SIZE) + HPAGE_SIZE
                            : (cur & -PAGE_SIZE) + PAGE_SIZE;
                    n = Math.min(len - done, pageEnd - cur);
                    if (toUser) {
                        MemorySegment.copy(seg, segOff + done, memory, pa, n);
                    } else {
                        MemorySegment.copy(memory, pa, seg, segOff + done, n);
                    }
                }
                done += n;
            }
        });
    }

    /** Touches every page of a range (reads, or writes zero-preserving) to fault it in. */
    public void populate(long va, long len, boolean write) {
        withFaultRetry(() -> {
            for (long p = va & -PAGE_SIZE; p < va + len; p += PAGE_SIZE) {
                resolve(p, write);
            }
        });
    }

    // ---------------------------------------------------------------------------------- pinning

    /** RLIMIT_MEMLOCK in bytes; pinning beyond it fails with ENOMEM. */
    public void setMemlockLimit(long bytes) {
        memlockLimitPages = bytes >>> PAGE_SHIFT;
    }

    public long memlockLimit() {
        return memlockLimitPages << PAGE_SHIFT;
    }

    /**
     * Charges {@code npages} to {@code mm->pinned_vm} against RLIMIT_MEMLOCK without pinning
     * anything, as {@code ib_umem_get} does for peer memory (whose pages the peer client pins).
     * Fails with ENOMEM, changing nothing, when the limit would be exceeded.
     */
    public void chargePinnedVm(long npages) {
        if (npages < 0) {
            throw new KernelException(Errno.EINVAL, "negative pinned_vm charge " + npages);
        }
        long now = pinnedVm.addAndGet(npages);
        if (now > memlockLimitPages) {
            pinnedVm.addAndGet(-npages);
            throw new KernelException(Errno.ENOMEM, String.format(
                    "%d pages would exceed RLIMIT_MEMLOCK (%d pages, %d already pinned); raise the limit (ulimit -l / setMemlockLimit)",
                    npages, memlockLimitPages, now - npages));
        }
    }

    /** Returns a {@link #chargePinnedVm} charge. */
    public void unchargePinnedVm(long npages) {
        long now = pinnedVm.addAndGet(-npages);
        if (now < 0) {
            pinnedVm.addAndGet(npages);
            throw new KernelException(Errno.EINVAL, "pinned_vm uncharge of " + npages + " pages exceeds the charge");
        }
    }

    /**
     * {@code pin_user_pages(FOLL_LONGTERM [| FOLL_WRITE])} of the pages covering [va, va+length),
     * charged to {@code mm->pinned_vm} against RLIMIT_MEMLOCK as {@code ib_umem_get} does.
     * Refuses device mappings ({@code VM_IO | VM_PFNMAP}) with EFAULT, so a caller can fall back
     * to peer memory. Faults pages in. Pinned pages are never reclaimed or migrated.
     */
    public PinnedPages pinUserPages(long va, long length, boolean write) {
        if (length <= 0 || va < 0 || va + length < va || va + length > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.EINVAL, String.format("pin_user_pages: bad range 0x%x + %d", va, length));
        }
        long start = va & -PAGE_SIZE;
        long end = (va + length + PAGE_SIZE - 1) & -PAGE_SIZE;
        int npages = Math.toIntExact((end - start) >>> PAGE_SHIFT);
        chargePinnedVm(npages);
        long[] pfns = new long[npages];
        // pages pinned so far stay pinned across a reclaim retry: reclaim cannot take them, so each
        // retry either makes progress or ends in ENOMEM
        int pinned = 0;
        for (;;) {
            long stamp = mmapLock.readLock();
            try {
                alive();
                for (; pinned < npages; pinned++) {
                    long p = start + ((long) pinned << PAGE_SHIFT);
                    Vma v = findVma(p);
                    if (v == null) {
                        throw new KernelException(Errno.EFAULT, String.format("pin_user_pages: 0x%x is not mapped", p));
                    }
                    if (v.kind() == Vma.Kind.DEVICE) {
                        throw new KernelException(Errno.EFAULT, String.format(
                                "pin_user_pages: 0x%x is in device mapping %s (VM_IO|VM_PFNMAP): it has no pages to pin", p, v.name()));
                    }
                    if (write && !v.writable() || !v.readable()) {
                        throw new KernelException(Errno.EFAULT, String.format(
                                "pin_user_pages: 0x%x: mapping %s does not allow %s", p, v.name(), write ? "writing" : "reading"));
                    }
                    if (write && v.kind() == Vma.Kind.FILE) {
                        throw new KernelException(Errno.EFAULT, String.format(
                                "pin_user_pages: 0x%x is in file mapping %s: writable long-term pins of file-backed memory are refused (as Linux 6.5+ does); use ODP or anonymous memory",
                                p, v.name()));
                    }
                    long pfn = resolve(p, write) >>> PAGE_SHIFT;
                    phys.pin(pfn, 1);
                    pfns[pinned] = pfn;
                }
                return new PinnedPages(this, start, pfns);
            } catch (RuntimeException e) {
                if (e != FaultRetry.INSTANCE) {
                    unpinPartial(pfns, pinned, npages);
                    throw e;
                }
            } finally {
                mmapLock.unlockRead(stamp);
            }
            try {
                reclaimForFault();
            } catch (KernelException e) {
                unpinPartial(pfns, pinned, npages);
                throw e;
            }
        }
    }

    private void unpinPartial(long[] pfns, int pinned, int charged) {
        for (int i = 0; i < pinned; i++) {
            if (phys.pin(pfns[i], -1) == 0) {
                mm.releaseIfUnused(pfns[i]);
            }
        }
        pinnedVm.addAndGet(-charged);
    }

    void unpin(PinnedPages pages) {
        for (int i = 0; i < pages.npages(); i++) {
            long pfn = pages.pfn(i);
            if (phys.pin(pfn, -1) == 0) {
                mm.releaseIfUnused(pfn);
            }
        }
        pinnedVm.addAndGet(-pages.npages());
    }

    // ---------------------------------------------------------------------------------- notifiers & HMM

    /** {@code mmu_interval_notifier_insert} over [start, start+length). */
    public MmuIntervalNotifier insertNotifier(long start, long length, MmuIntervalNotifierOps ops) {
        if (length <= 0 || start < 0 || start + length < start || start + length > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.EINVAL, String.format("notifier range 0x%x + %d is empty or outside the address space", start, length));
        }
        alive();
        return notifiers.insert(this, start, start + length, ops);
    }

    /**
     * {@code hmm_range_fault}: fills {@code range.hmmPfns}. With HMM_PFN_REQ_FAULT missing pages
     * are faulted in (for write with HMM_PFN_REQ_WRITE); without it the walk is a snapshot. Fails
     * with EBUSY when the notifier's interval was invalidated since {@code range.notifierSeq}
     * (the caller retries from readBegin), EFAULT for a hole or a device mapping, EPERM when the
     * protection forbids the requested access. Takes no page references: the caller relies on
     * the notifier, under its lock, with readRetry.
     */
    public void hmmRangeFault(HmmRange range) {
        if (range.notifier.mm() != this || range.start < range.notifier.start() || range.end > range.notifier.end()) {
            throw new KernelException(Errno.EINVAL, String.format("hmm range 0x%x-0x%x is outside its notifier %s",
                    range.start, range.end, range.notifier));
        }
        boolean fault = (range.defaultFlags & HmmRange.HMM_PFN_REQ_FAULT) != 0;
        boolean write = (range.defaultFlags & HmmRange.HMM_PFN_REQ_WRITE) != 0;
        withFaultRetry(() -> {
            alive();
            if (range.notifier.readRetry(range.notifierSeq)) {
                throw new KernelException(Errno.EBUSY, "hmm_range_fault: the range was invalidated; retry from mmu_interval_read_begin");
            }
            for (int i = 0; i < range.hmmPfns.length; i++) {
                long va = range.start + ((long) i << PAGE_SHIFT);
                Vma v = findVma(va);
                if (v == null || v.kind() == Vma.Kind.DEVICE) {
                    throw new KernelException(Errno.EFAULT, String.format("hmm_range_fault: 0x%x is %s", va,
                            v == null ? "not mapped" : "in device mapping " + v.name()));
                }
                long e = pt.lookup(va);
                if (fault) {
                    if (!v.readable() || write && !v.writable()) {
                        throw new KernelException(Errno.EPERM, String.format("hmm_range_fault: 0x%x in %s does not allow %s",
                                va, v.name(), write ? "writing" : "reading"));
                    }
                    long need = write ? PageTable.PRESENT | PageTable.WRITE : PageTable.PRESENT;
                    if ((e & need) != need) {
                        resolve(va, write);
                        e = pt.lookup(va);
                    }
                }
                if ((e & PageTable.PRESENT) == 0) {
                    range.hmmPfns[i] = 0;
                    continue;
                }
                boolean huge = (e & PageTable.HUGE) != 0;
                long pfn = PageTable.pfn(e) + (huge ? (va & (HPAGE_SIZE - 1)) >>> PAGE_SHIFT : 0);
                range.hmmPfns[i] = pfn | HmmRange.HMM_PFN_VALID
                        | ((e & PageTable.WRITE) != 0 && v.writable() ? HmmRange.HMM_PFN_WRITE : 0)
                        | ((long) (huge ? HPAGE_ORDER : 0) << HmmRange.HMM_PFN_ORDER_SHIFT);
            }
            if (range.notifier.readRetry(range.notifierSeq)) {
                throw new KernelException(Errno.EBUSY, "hmm_range_fault: the range was invalidated during the walk; retry");
            }
        });
    }

    /**
     * {@code msync(MS_SYNC)}: writes the dirty pages of the file mappings in the range back to their
     * files and marks them clean. Returns the number of pages written.
     */
    public long msync(long addr, long length) {
        return onMappedRange(addr, length, "msync", (start, end) -> {
            long[] n = {0};
            for (Vma v : vmasIn(start, end)) {
                if (v.file() == null) {
                    continue;
                }
                forEachEntry(v.start(), v.end(), (va, e) -> {
                    if ((e & (PageTable.PRESENT | PageTable.DIRTY)) == (PageTable.PRESENT | PageTable.DIRTY)) {
                        v.file().writePage(v.offsetOf(va), phys.frame(PageTable.pfn(e)));
                        pt.setPte(va, e & ~PageTable.DIRTY);
                        n[0]++;
                    }
                });
            }
            return n[0];
        });
    }

    // ---------------------------------------------------------------------------------- exit & views

    /** Files the process holds open (uverbs contexts); guarded by itself, with {@link #exiting}. */
    private final java.util.Set<AutoCloseable> files = new java.util.LinkedHashSet<>();
    /** Set under the files monitor when exit starts: no file opens after that. */
    private boolean exiting;

    /**
     * Records a file the process holds open ({@code fd_install}): {@link #exit()} closes it, as
     * closing the process's file table closes {@code /dev/infiniband/uverbsN} and with it every
     * RDMA object of the process.
     *
     * @throws KernelException EFAULT when the process is exiting or has exited
     */
    public void openFile(AutoCloseable file) {
        synchronized (files) {
            if (exiting) {
                throw new KernelException(Errno.EFAULT, "process " + pid + " (" + name + ") is exiting: it opens no file");
            }
            files.add(file);
        }
    }

    /** Forgets a file the process closed itself. */
    public void closeFile(AutoCloseable file) {
        synchronized (files) {
            files.remove(file);
        }
    }

    /** Files open now (for leak checks). */
    public int openFiles() {
        synchronized (files) {
            return files.size();
        }
    }

    /**
     * Closes the process's files, newest first, before its memory goes. The kernel's
     * {@code do_exit} tears the mm down before {@code exit_files}; closing first here means an RDMA
     * object never sees its memory vanish under it (pins would keep the frames anyway). A file whose
     * close fails is logged and forgotten: exit never stops half-way.
     */
    private void closeFiles() {
        java.util.List<AutoCloseable> open;
        synchronized (files) {
            exiting = true;
            open = new ArrayList<>(files);
            files.clear();
        }
        java.util.Collections.reverse(open);
        for (AutoCloseable f : open) {
            try {
                f.close();
            } catch (Exception e) {
                System.getLogger("org.peerdirect.kernel.mm").log(System.Logger.Level.WARNING,
                        "process " + pid + " (" + name + "): closing " + f + " at exit failed", e);
            }
        }
    }

    /**
     * Process exit: open files are closed first (see {@link #openFile}); then notifiers see RELEASE over the whole space, then every mapping goes. Pins
     * outlive the process: their frames are freed when unpinned.
     */
    public void exit() {
        closeFiles();
        long stamp = mmapLock.writeLock();
        try {
            if (dead) {
                return;
            }
            invalidate(0, PageTable.TASK_SIZE, MmuNotifierEvent.RELEASE, () -> {
                for (Vma v : new ArrayList<>(vmas.values())) {
                    zap(v);
                    if (v.file() != null) {
                        v.file().close(); // closing twice (split VMAs) is harmless
                    }
                }
                vmas.clear();
            });
            dead = true;
        } finally {
            mmapLock.unlockWrite(stamp);
        }
        mm.exited(this);
    }

    public boolean exited() {
        return dead;
    }

    /** /proc/pid/maps. */
    public List<String> maps() {
        long stamp = mmapLock.readLock();
        try {
            return vmas.values().stream().map(Vma::mapsLine).toList();
        } finally {
            mmapLock.unlockRead(stamp);
        }
    }

    public List<Vma> vmas() {
        long stamp = mmapLock.readLock();
        try {
            return List.copyOf(vmas.values());
        } finally {
            mmapLock.unlockRead(stamp);
        }
    }

    /** Resident pages (4 KiB units). */
    public long rssPages() {
        return rss.get();
    }

    public long swappedPages() {
        return swapped.get();
    }

    public long pinnedPages() {
        return pinnedVm.get();
    }

    public long faultCount() {
        return faults.get();
    }

    /** Java heap of this address space's page tables, in bytes (PTE tables dominate). */
    public long pageTableBytes() {
        return pt.pteTables() * (512L * 8 + 16);
    }

    /** The frame currently backing va, or -1 (not present). For tests and tools. */
    public long pfnOf(long va) {
        long stamp = mmapLock.readLock();
        try {
            long e = pt.lookup(va);
            if ((e & PageTable.PRESENT) == 0) {
                return -1;
            }
            return PageTable.pfn(e) + ((e & PageTable.HUGE) != 0 ? (va & (HPAGE_SIZE - 1)) >>> PAGE_SHIFT : 0);
        } finally {
            mmapLock.unlockRead(stamp);
        }
    }

    public List<MmuIntervalNotifier> intervalNotifiers() {
        return notifiers.all();
    }

    @Override
    public String toString() {
        return "process " + pid + " (" + name + ")";
    }
}
