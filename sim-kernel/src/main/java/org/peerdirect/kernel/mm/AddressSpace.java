package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * A simulated process's address space ({@code struct mm_struct}): VMAs, a 4-level page table,
 * CPU access with demand faults, pinning, MMU interval notifiers and {@code hmm_range_fault}.
 *
 * <p>This class holds the state and the public face; the code lives, as in the kernel, in one
 * package-private class per source file, each working on this state: {@link Mmap} (mm/mmap.c,
 * mm/mprotect.c), {@link Memory} (mm/memory.c), {@link Gup} (mm/gup.c), {@link Vmscan}
 * (mm/vmscan.c, mm/madvise.c, mm/migrate.c, mm/msync.c) and {@link Hmm} (mm/hmm.c).
 *
 * <p>Locks, in order:
 * <ol>
 * <li>{@code mmapLock} ({@code mmap_lock}): write for changes of VMAs and for removing or
 * changing present entries (munmap, mprotect, madvise, migration, reclaim, msync, exit); read
 * for CPU access, faults, pinning and HMM walks. Notifier callbacks run with it held in write
 * mode.</li>
 * <li>{@code ptl} (the page-table lock): held by faults, under the read lock, to install entries,
 * so two faulting threads do not both allocate a frame for the same page.</li>
 * <li>the physical allocator lock, inside either.</li>
 * </ol>
 * Helpers that need a lock assert it (a {@link StampedLock} has no owner, so the mmap lock
 * assertions check that some thread holds it). Invariant: a frame mapped by a present entry is
 * allocated and its rmap names this address space and page; frames are freed only when unmapped
 * and unpinned.
 */
public final class AddressSpace {

    final Mm kernel;
    private final int pid;
    private final String name;
    final StampedLock mmapLock = new StampedLock();
    /** Serialises faults installing entries (see the lock order above). */
    final Object ptl = new Object();
    /** Guarded by mmapLock (write to change, read to look up). */
    final TreeMap<Long, Vma> vmas = new TreeMap<>();
    /**
     * Entries are written under mmapLock in write mode, or in read mode with ptl held (faults);
     * an access sets the accessed and dirty bits of a present entry by compare-and-set, in read mode.
     */
    final PageTable pt = new PageTable();
    private final MmuNotifierSubscriptions notifiers = new MmuNotifierSubscriptions();
    /** Not part of a real mm_struct (it is the task's): open files go at exit, before the memory. */
    private final FilesStruct files;
    final PhysicalMemory phys;
    /** All of physical memory; a physical address is an offset in it. */
    final MemorySegment memory;
    final AtomicLong rss = new AtomicLong();
    final AtomicLong swapped = new AtomicLong();
    final AtomicLong pinnedVm = new AtomicLong();
    final AtomicLong faults = new AtomicLong();
    volatile long memlockLimitPages;
    /** Set by exit under mmapLock in write mode; nothing maps or pins after that. */
    volatile boolean dead;

    AddressSpace(Mm kernel, int pid, String name, long memlockLimitBytes) {
        this.kernel = kernel;
        this.pid = pid;
        this.name = name;
        this.phys = PhysicalMemory.of(kernel);
        this.memory = phys.memory();
        this.memlockLimitPages = memlockLimitBytes >>> PAGE_SHIFT;
        this.files = new FilesStruct(toString());
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

    /** The reverse-map tag of the frame mapping va: this process and the virtual page number. */
    long rmap(long va) {
        return ((long) pid << 36) | (va >>> PAGE_SHIFT);
    }

    /** For assertions: the mmap lock is held, in either mode (by some thread). */
    boolean mmapLocked() {
        return mmapLock.isWriteLocked() || mmapLock.isReadLocked();
    }

    /** Fails with EFAULT once the process has exited: final under the mmap lock, as exit sets {@link #dead} under it. */
    void alive() {
        if (dead) {
            throw new KernelException(Errno.EFAULT, "process " + pid + " (" + name + ") has exited");
        }
    }

    /**
     * Runs {@code change} between invalidate_range_start and _end. Caller holds the write lock,
     * so no fault, pin or HMM walk runs until the notifiers have stopped their devices.
     *
     * @see "mmu_notifier_invalidate_range_start() in mm/mmu_notifier.c"
     */
    void invalidate(long start, long end, MmuNotifierEvent event, Runnable change) {
        assert mmapLock.isWriteLocked();
        MmuNotifierRange range = new MmuNotifierRange(this, start, end, event);
        try {
            // a callback that failed may not have stopped its device: the change is not made (the
            // pages and frames stay as they were, nothing is lost) and the caller gets the failure
            notifiers.start(range);
            change.run();
        } finally {
            notifiers.end(range);
        }
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
        return Mmap.mmap(this, addr, length, prot, kind, name);
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
        return mmapDevice(addr, Collections.singletonList(device), prot, name);
    }

    /**
     * Maps device memory made of several pieces (for instance frames a driver allocated in
     * blocks) at consecutive addresses, atomically: one device VMA per piece, so the range is
     * one contiguous user mapping. Returns the start address.
     */
    public long mmapDevice(long addr, List<MemorySegment> pieces, int prot, String name) {
        return Mmap.mmapDevice(this, addr, pieces, prot, name);
    }

    /**
     * {@code mmap(MAP_SHARED)} of a real file from {@code offset} (page aligned): faults read the
     * file, dirty pages are written back by {@link #msync}, munmap, page-out, reclaim and exit. A
     * page wholly past the end of the file cannot be touched (SIGBUS, reported as a
     * {@link SegmentationFault}). Writable long-term pins of such mappings are refused, as Linux 6.5+
     * refuses {@code FOLL_LONGTERM | FOLL_WRITE} on file-backed memory.
     */
    public long mmapFile(long addr, Path path, long offset, long length, int prot, String name) {
        return Mmap.mmapFile(this, addr, path, offset, length, prot, name);
    }

    /**
     * {@code munmap}: notifiers see UNMAP before any entry changes; frames are freed (or, if
     * pinned, freed at unpin). Unlike Linux, a range with no mapping at all is an error here. A
     * range that would split a hugetlb mapping inside a 2 MiB page fails with EINVAL, changing
     * nothing.
     */
    public void munmap(long addr, long length) {
        Mmap.munmap(this, addr, length);
    }

    /**
     * {@code mprotect}: the whole range must be mapped (ENOMEM); notifiers see PROTECTION_VMA
     * first. A range that would split a hugetlb mapping inside a 2 MiB page fails with EINVAL,
     * changing nothing, as {@code hugetlb_vm_op_split} refuses the split in Linux.
     */
    public void mprotect(long addr, long length, int prot) {
        Mmap.mprotect(this, addr, length, prot);
    }

    // ---------------------------------------------------------------------------------- madvise, migrate, msync

    /** Advice for {@link #madvise}. */
    public enum Advice {
        /** drop the pages: the next touch sees zeroes (anonymous memory). */
        MADV_DONTNEED,
        /** reclaim the pages now: they go to swap and fault back in with their contents. */
        MADV_PAGEOUT
    }

    /**
     * {@code madvise}; returns the number of entries dropped or paged out (a 2 MiB page counts
     * once; pinned pages stay). Refused with EINVAL, changing nothing, for device mappings, for
     * MADV_PAGEOUT of hugetlb memory, and for MADV_DONTNEED of a hugetlb range starting inside a
     * huge page; on hugetlb memory MADV_DONTNEED drops only the huge pages wholly in the range
     * (Linux rounds the end down, so 4 KiB from a huge page boundary drops nothing).
     *
     * @see "madvise_dontneed_free_valid_vma() in mm/madvise.c"
     */
    public long madvise(long addr, long length, Advice advice) {
        return Vmscan.madvise(this, addr, length, advice);
    }

    /**
     * Moves the present, unpinned 4 KiB pages of a range to other frames (as compaction or NUMA
     * balancing would); notifiers see MIGRATE first. Returns pages moved; pinned pages stay.
     */
    public long migrate(long addr, long length) {
        return Vmscan.migrate(this, addr, length);
    }

    /**
     * {@code msync(MS_SYNC)}: writes the dirty pages of the file mappings in the range back to their
     * files, PROT_NONE ones included, and cleans them as writeback does: notifiers see
     * PROTECTION_PAGE first, and the pages are write-protected, so the next write (the CPU's, or a
     * device's through {@link #hmmRangeFault}) faults and dirties them again. Returns the number of
     * pages written.
     */
    public long msync(long addr, long length) {
        return Vmscan.msync(this, addr, length);
    }

    // ---------------------------------------------------------------------------------- CPU access

    public long readLong(long va) {
        return Memory.readLong(this, va);
    }

    public void writeLong(long va, long value) {
        Memory.writeLong(this, va, value);
    }

    public byte readByte(long va) {
        return (byte) Memory.scalar(this, va, false, false, 0);
    }

    public void writeByte(long va, byte value) {
        Memory.scalar(this, va, false, true, value);
    }

    /** Copies {@code len} bytes from user memory at va into {@code dst} (copy_from_user). */
    public void copyOut(long va, MemorySegment dst, long dstOffset, long len) {
        Memory.bulk(this, va, dst, dstOffset, len, false);
    }

    /** Copies {@code len} bytes from {@code src} into user memory at va (copy_to_user). */
    public void copyIn(long va, MemorySegment src, long srcOffset, long len) {
        Memory.bulk(this, va, src, srcOffset, len, true);
    }

    public void read(long va, byte[] dst, int off, int len) {
        Memory.bulk(this, va, MemorySegment.ofArray(dst), off, len, false);
    }

    public void write(long va, byte[] src, int off, int len) {
        Memory.bulk(this, va, MemorySegment.ofArray(src), off, len, true);
    }

    /**
     * Touches every page of a range (reads, or writes zero-preserving) to fault it in. An empty
     * range does nothing; a negative length or a range that wraps fails with EINVAL.
     */
    public void populate(long va, long len, boolean write) {
        Memory.populate(this, va, len, write);
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
     * Fails with ENOMEM, changing nothing, when the limit would be exceeded (EINVAL for a negative
     * count). The check and the charge are one atomic step: concurrent charges never take
     * {@code pinned_vm} past the limit, and one that fits never fails because a concurrent one
     * does not.
     */
    public void chargePinnedVm(long npages) {
        Gup.chargePinnedVm(this, npages);
    }

    /**
     * Returns a {@link #chargePinnedVm} charge. Fails with EINVAL, changing nothing, for a
     * negative count or more pages than are charged.
     */
    public void unchargePinnedVm(long npages) {
        Gup.unchargePinnedVm(this, npages);
    }

    /**
     * {@code pin_user_pages(FOLL_LONGTERM [| FOLL_WRITE])} of the pages covering [va, va+length),
     * charged to {@code mm->pinned_vm} against RLIMIT_MEMLOCK as {@code ib_umem_get} does.
     * Refuses device mappings ({@code VM_IO | VM_PFNMAP}) with EFAULT, so a caller can fall back
     * to peer memory. Faults pages in. Pinned pages are never reclaimed or migrated. A range of
     * more than 2^31 - 1 pages fails with EINVAL, as {@code ib_umem_get} refuses more than
     * {@code UINT_MAX}.
     */
    public PinnedPages pinUserPages(long va, long length, boolean write) {
        return Gup.pinUserPages(this, va, length, write);
    }

    // ---------------------------------------------------------------------------------- notifiers & HMM

    /**
     * {@code mmu_interval_notifier_insert} over [start, start+length). Takes the mmap lock (read
     * mode), as the kernel's registration takes {@code mmap_lock}: exit sets {@link #dead} under
     * the write lock after its RELEASE invalidation, so an insert either comes before exit, and
     * sees RELEASE, or fails with EFAULT; never in between, into an address space that is going.
     * Must not be called with this address space's mmap lock held (from a notifier callback).
     */
    public MmuIntervalNotifier insertNotifier(long start, long length, MmuIntervalNotifierOps ops) {
        if (length <= 0 || start < 0 || start + length < start || start + length > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.EINVAL, String.format("notifier range 0x%x + %d is empty or outside the address space", start, length));
        }
        long stamp = mmapLock.readLock();
        try {
            alive();
            return notifiers.insert(this, start, start + length, ops);
        } finally {
            mmapLock.unlockRead(stamp);
        }
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
        Hmm.hmmRangeFault(this, range);
    }

    public List<MmuIntervalNotifier> intervalNotifiers() {
        return notifiers.all();
    }

    // ---------------------------------------------------------------------------------- files & exit

    /**
     * Records a file the process holds open ({@code fd_install}): {@link #exit()} closes it, as
     * closing the process's file table closes {@code /dev/infiniband/uverbsN} and with it every
     * RDMA object of the process.
     *
     * @throws KernelException EFAULT when the process is exiting or has exited
     */
    public void openFile(AutoCloseable file) {
        files.install(file);
    }

    /**
     * {@code fd_install}: the process holds {@code file} open under the lowest free descriptor
     * (from 3); {@link #exit()} closes it, {@link #close(int)} too.
     *
     * @throws KernelException EFAULT when the process is exiting or has exited
     * @since 0.9
     */
    public int installFd(AutoCloseable file) {
        return files.installFd(file);
    }

    /**
     * {@code fdget}: the file open under {@code fd}.
     *
     * @throws KernelException EBADF when nothing is open there
     * @since 0.9
     */
    public AutoCloseable fget(int fd) {
        return files.fget(fd);
    }

    /**
     * {@code close(fd)}: the descriptor goes and the file is closed (its release runs when nothing
     * else holds it: that is the file's business).
     *
     * @throws KernelException EBADF when nothing is open there
     * @since 0.9
     */
    public void close(int fd) throws Exception {
        files.removeFd(fd).close();
    }

    /** Forgets a file the process closed itself. */
    public void closeFile(AutoCloseable file) {
        files.remove(file);
    }

    /** Files open now (for leak checks). */
    public int openFiles() {
        return files.count();
    }

    /**
     * Process exit: open files are closed first (see {@link #openFile}); then notifiers see RELEASE over the whole space, then every mapping goes. Pins
     * outlive the process: their frames are freed when unpinned.
     */
    public void exit() {
        files.closeAll();
        if (Mmap.exitMmap(this)) {
            kernel.exited(this);
        }
    }

    public boolean exited() {
        return dead;
    }

    // ---------------------------------------------------------------------------------- views

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

    /**
     * The CPU's view of the 4 KiB page at {@code va} of this process while the page is pinned
     * ({@link #pinUserPages}, {@code ib_umem_get}): what a user-space driver library that keeps
     * its queues in pinned memory writes through, as the CPU does through its TLB entry. A pinned
     * page cannot be moved, swapped or freed, so the view stays valid until it is unpinned; using
     * it after that is the library's bug, as in C.
     *
     * @throws KernelException EFAULT when the page is not present or not pinned
     */
    public MemorySegment pinnedPageView(long va) {
        long pfn = pfnOf(va);
        if (pfn < 0 || phys.pinCount(pfn) == 0) {
            throw new KernelException(KernelException.Errno.EFAULT, String.format("%s: page at 0x%x is %s", this, va,
                    pfn < 0 ? "not present" : "not pinned"));
        }
        return phys.frame(pfn);
    }

    /** The frame currently backing va, or -1 (not present). For tests and tools. */
    public long pfnOf(long va) {
        long stamp = mmapLock.readLock();
        try {
            long e = pt.lookup(va);
            if ((e & PageTable.PRESENT) == 0) {
                return -1;
            }
            return PageTable.pfnAt(e, va);
        } finally {
            mmapLock.unlockRead(stamp);
        }
    }

    @Override
    public String toString() {
        return "process " + pid + " (" + name + ")";
    }
}
