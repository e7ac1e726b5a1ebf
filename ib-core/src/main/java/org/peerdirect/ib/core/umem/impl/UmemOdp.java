package org.peerdirect.ib.core.umem.impl;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.HmmRange;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.MmuIntervalNotifier;
import org.peerdirect.kernel.mm.MmuNotifierRange;

/**
 * {@code struct ib_umem_odp} ({@code drivers/infiniband/core/umem_odp.c}). See {@link IbUmemOdp}
 * for the protocol.
 *
 * <p>Lock rules: {@link #umemMutex} ({@code umem_mutex}) guards {@link #chunks} and
 * {@link #npages}; the fault path takes it after its walk and returns holding it; the
 * invalidation path takes it in the driver's callback, which the mm calls with the mmap lock
 * held. The mutex is never held while walking the process's memory or removing the notifier
 * (both would wait for the mmap lock or for the callback, which waits for the mutex).
 *
 * <p>Invariant (NIC-present implies CPU-present): an entry is installed only under the mutex
 * after {@code mmu_interval_read_retry} said no invalidation overtook the walk that found its
 * frame, and every change of the page in the process is preceded by an invalidation that clears
 * the entry under the mutex. So a mapped entry's frame is the frame the process maps at that
 * address now.
 */
final class UmemOdp implements IbUmemOdp {

    /** {@code HMM_RANGE_DEFAULT_TIMEOUT}: how long the fault path retries overtaken walks. */
    static final long HMM_RANGE_DEFAULT_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(1);
    /** Entries per chunk of the sparse {@code dma_list}. */
    static final int CHUNK = 512;
    /** Bytes one chunk costs (its array, the map's node and key), for {@link #metadataBytes()}. */
    private static final long CHUNK_BYTES = 16 + 8L * (CHUNK + 1) + 48 + 16;

    private final AddressSpace mm;
    private final DmaDevice device;
    private final long address;
    private final long length;
    private final int access;
    private final boolean implicit;
    private final int pageShift;
    private final long start;
    private final long end;
    private final UmemOdpInvalidate ops;
    /**
     * Null for an implicit umem. Set by the constructor from the insert, and by the callback from
     * its own argument before anything else: an invalidation may reach the notifier as soon as it
     * is inserted, before the insert returns (the kernel embeds the notifier in the umem, so
     * {@code mmu_interval_set_seq} always finds it).
     */
    private volatile MmuIntervalNotifier notifier;
    /**
     * The umem's IOVA range ({@code hmm_dma_map_alloc}'s {@code dma_iova_try_alloc}): granule i
     * maps at {@code iovaBase + (i << pageShift)} once linked, so a run of mapped granules is one
     * run of IOVA and unmaps in one call. -1 when the mapper had no range for it (a large umem,
     * an implicit one): granules are then mapped one by one ({@code dma_map_page}).
     */
    private final long iovaBase;
    private final ReentrantLock umemMutex = new ReentrantLock();
    /**
     * Guarded by umemMutex: {@code dma_list} by granule index / CHUNK; entries are iova | access
     * bits, and the extra last slot counts the chunk's mapped entries (the chunk goes at 0).
     */
    private final Map<Long, long[]> chunks = new HashMap<>();
    /** Guarded by umemMutex: granules mapped. */
    private long npages;
    private final AtomicBoolean released = new AtomicBoolean();
    /**
     * Test seam: runs between the walk and taking the mutex, the window an invalidation can
     * overtake the walk in (a test drops the page there and expects the retry). Null otherwise.
     */
    volatile Runnable afterWalk;
    /** Test seam: the fault path's timeout ({@link #HMM_RANGE_DEFAULT_TIMEOUT_NS} unless a test shortens it). */
    volatile long hmmTimeoutNs = HMM_RANGE_DEFAULT_TIMEOUT_NS;

    /** {@code ib_umem_odp_get} / {@code ib_umem_odp_alloc_child}. */
    private UmemOdp(AddressSpace mm, DmaDevice device, long addr, long size, int access, UmemOdpInvalidate ops) {
        this.mm = mm;
        this.device = device;
        this.address = addr;
        this.length = size;
        this.access = access;
        this.implicit = false;
        this.ops = ops;
        this.pageShift = (access & IbAccess.HUGETLB) != 0 ? Mm.PAGE_SHIFT + Mm.HPAGE_ORDER : Mm.PAGE_SHIFT;
        long page = 1L << pageShift;
        if (size <= 0 || addr < 0) {
            throw new KernelException(Errno.EINVAL, String.format("ib_umem_odp_get: empty or negative range 0x%x + %d", addr, size));
        }
        long s = addr & -page;
        long e = addr + size + page - 1;
        if (e < addr) {
            throw new KernelException(Errno.EOVERFLOW, String.format("ib_umem_odp_get: 0x%x + %d wraps when aligned to %d bytes", addr, size, page));
        }
        this.start = s;
        this.end = e & -page;
        this.iovaBase = device.dma().dmaIovaTryAlloc(end - start);
        // every field the callback uses is set before the insert; the notifier itself the callback
        // takes from its argument, since it may run before the insert returns
        try {
            this.notifier = mm.insertNotifier(start, end - start, (n, range, cur) -> {
                notifier = n;
                return ops.invalidate(this, range, cur);
            });
        } catch (RuntimeException ex) {
            if (iovaBase >= 0) {
                device.dma().dmaIovaFree(iovaBase, end - start);
            }
            throw ex;
        }
    }

    /** {@code ib_umem_odp_alloc_implicit}. */
    private UmemOdp(AddressSpace mm, DmaDevice device, int access) {
        this.mm = mm;
        this.device = device;
        this.address = 0;
        this.length = 0;
        this.access = access;
        this.implicit = true;
        this.ops = null;
        this.pageShift = Mm.PAGE_SHIFT;
        this.start = 0;
        this.end = 0;
        this.notifier = null;
        this.iovaBase = -1;
    }

    static UmemOdp get(AddressSpace mm, DmaDevice device, long addr, long size, int access, UmemOdpInvalidate ops) {
        checkAccess(access, "ib_umem_odp_get");
        if (ops == null) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_get: no invalidation callback");
        }
        return new UmemOdp(mm, device, addr, size, access, ops);
    }

    static UmemOdp allocImplicit(AddressSpace mm, DmaDevice device, int access) {
        checkAccess(access, "ib_umem_odp_alloc_implicit");
        if ((access & IbAccess.HUGETLB) != 0) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_alloc_implicit: IB_ACCESS_HUGETLB applies to explicit ODP only");
        }
        return new UmemOdp(mm, device, access);
    }

    private static void checkAccess(int access, String fn) {
        if ((access & IbAccess.ON_DEMAND) == 0) {
            throw new KernelException(Errno.EINVAL, fn + ": the access flags lack IB_ACCESS_ON_DEMAND");
        }
        if ((access & ~IbAccess.SUPPORTED) != 0) {
            throw new KernelException(Errno.EINVAL, fn + ": unknown access flags 0x" + Integer.toHexString(access & ~IbAccess.SUPPORTED));
        }
    }

    @Override
    public IbUmemOdp allocChild(long addr, long size, UmemOdpInvalidate ops) {
        if (!implicit) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_alloc_child: " + this + " is not an implicit umem");
        }
        if (ops == null) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_alloc_child: no invalidation callback");
        }
        if (mm.exited()) { // mmget_not_zero
            throw new KernelException(Errno.EFAULT, "ib_umem_odp_alloc_child: process " + mm.pid() + " has exited");
        }
        return new UmemOdp(mm, device, addr, size, access, ops); // an implicit umem has no HUGETLB
    }

    @Override
    public long mapDmaAndLock(long userVirt, long bcnt, long accessMask, boolean fault) {
        if (implicit) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_map_dma_and_lock: an implicit umem maps through its children");
        }
        if (bcnt <= 0 || userVirt < start || userVirt + bcnt > end || userVirt + bcnt < userVirt) {
            throw new KernelException(Errno.EFAULT, String.format("ib_umem_odp_map_dma_and_lock: 0x%x + %d is outside %s", userVirt, bcnt, this));
        }
        if ((accessMask & ~(ODP_READ_ALLOWED | ODP_WRITE_ALLOWED)) != 0 || (accessMask & ODP_READ_ALLOWED) == 0) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_map_dma_and_lock: access mask 0x" + Long.toHexString(accessMask)
                    + " (read, and optionally write)");
        }
        if ((accessMask & ODP_WRITE_ALLOWED) != 0 && !writable()) {
            throw new KernelException(Errno.EFAULT, "ib_umem_odp_map_dma_and_lock: write access to a read-only registration " + this);
        }
        if (mm.exited()) {
            throw new KernelException(Errno.EINVAL, "ib_umem_odp_map_dma_and_lock: process " + mm.pid() + " has exited");
        }
        long page = 1L << pageShift;
        long rangeStart = userVirt & -page;
        long rangeEnd = (userVirt + bcnt + page - 1) & -page;
        boolean write = (accessMask & ODP_WRITE_ALLOWED) != 0;
        int flags = fault ? HmmRange.HMM_PFN_REQ_FAULT | (write ? HmmRange.HMM_PFN_REQ_WRITE : 0) : 0;
        long deadline = System.nanoTime() + hmmTimeoutNs;
        HmmRange range;
        for (;;) {
            range = new HmmRange(notifier, rangeStart, rangeEnd, flags);
            range.notifierSeq = notifier.readBegin();
            try {
                mm.hmmRangeFault(range);
            } catch (KernelException e) {
                if (e.errno() == Errno.EBUSY && System.nanoTime() - deadline < 0) {
                    continue; // an invalidation overtook the walk
                }
                throw e;
            }
            Runnable hook = afterWalk;
            if (hook != null) {
                hook.run();
            }
            umemMutex.lock();
            if (!notifier.readRetry(range.notifierSeq)) {
                break;
            }
            // overtaken after the walk: walk again, without a deadline, as the kernel does (only
            // hmm_range_fault's own EBUSY past the timeout fails the fault). A deadline here turned
            // a slow walk on a loaded machine into an error completion no kernel would give.
            umemMutex.unlock();
        }
        try {
            return install(range, accessMask, fault);
        } catch (RuntimeException e) {
            umemMutex.unlock();
            throw e;
        }
    }

    /**
     * Under the mutex: maps the walked pages; returns the granules of the range mapped now. With an
     * IOVA range, each run of newly present granules is linked in one call and its entries set
     * after the link succeeded (an entry is never set for a page not mapped).
     */
    private long install(HmmRange range, long accessMask, boolean fault) {
        assert umemMutex.isHeldByCurrentThread();
        int per = 1 << (pageShift - Mm.PAGE_SHIFT);
        long mapped = 0;
        long[] pfns = new long[iovaBase >= 0 ? range.hmmPfns.length : per];
        int run = -1; // IOVA range: the first 4 KiB index of the pending run of new granules
        for (int g = 0; g < range.hmmPfns.length; g += per) {
            long head = range.hmmPfns[g];
            long va = range.start + ((long) g << Mm.PAGE_SHIFT);
            if ((head & HmmRange.HMM_PFN_VALID) == 0) {
                // not present for the CPU (snapshot mode); nor for the device: an entry still here
                // was not invalidated since the walk began, so the walk found its page present
                assert entry(va) == 0 : "NIC-present implies CPU-present at 0x" + Long.toHexString(va);
                run = link(range, run, g, pfns, accessMask, fault);
                continue;
            }
            if (per > 1 && HmmRange.order(head) + Mm.PAGE_SHIFT < pageShift) {
                throw new KernelException(Errno.EINVAL, String.format(
                        "ib_umem_odp_map_dma_and_lock: 0x%x is not in a huge page, and %s maps 2 MiB granules (IB_ACCESS_HUGETLB)", va, this));
            }
            long old = entry(va);
            if (old != 0) {
                // already mapped (the frame cannot have changed: that would have invalidated it): refresh the rights
                run = link(range, run, g, pfns, accessMask, fault);
                setEntry(va, old | bits(head, accessMask, fault));
            } else if (iovaBase >= 0) {
                run = run < 0 ? g : run;
            } else {
                for (int i = 0; i < per; i++) {
                    pfns[i] = HmmRange.pfn(range.hmmPfns[g + i]);
                }
                long iova = per == 1 ? device.dma().dmaMapPage(pfns[0], DmaDirection.BIDIRECTIONAL)
                        : device.dma().dmaMapSg(pfns, DmaDirection.BIDIRECTIONAL);
                setEntry(va, iova | bits(head, accessMask, fault));
                npages++;
            }
            mapped++;
        }
        link(range, run, range.hmmPfns.length, pfns, accessMask, fault);
        return mapped;
    }

    /** The access bits of a granule whose walked head pfn is {@code head}: what was asked, or in snapshot mode what the CPU has. */
    private static long bits(long head, long accessMask, boolean fault) {
        return fault ? accessMask : ODP_READ_ALLOWED | ((head & HmmRange.HMM_PFN_WRITE) != 0 ? accessMask & ODP_WRITE_ALLOWED : 0);
    }

    /**
     * Links the pending run of new granules, 4 KiB indexes [run, to) of the walk, into the IOVA
     * range and sets their entries; returns -1 (no run pending). Nothing when {@code run < 0}.
     */
    private int link(HmmRange range, int run, int to, long[] pfns, long accessMask, boolean fault) {
        if (run < 0) {
            return -1;
        }
        int n = to - run;
        for (int i = 0; i < n; i++) {
            pfns[i] = HmmRange.pfn(range.hmmPfns[run + i]);
        }
        long va = range.start + ((long) run << Mm.PAGE_SHIFT);
        long iova = iovaBase + (va - start);
        device.dma().dmaIovaLink(iova, pfns, n, DmaDirection.BIDIRECTIONAL);
        long page = 1L << pageShift;
        for (int g = run; g < to; g += 1 << (pageShift - Mm.PAGE_SHIFT), va += page, iova += page) {
            setEntry(va, iova | bits(range.hmmPfns[g], accessMask, fault));
            npages++;
        }
        return -1;
    }

    @Override
    public void unmapDmaPages(long virt, long bound) {
        assert umemMutex.isHeldByCurrentThread();
        if (implicit) {
            return;
        }
        long page = 1L << pageShift;
        long from = Math.max(virt, start) & -page;
        long to = Math.min(bound, end);
        int per = 1 << (pageShift - Mm.PAGE_SHIFT);
        long run = -1; // IOVA range: the first address of the pending run of mapped granules
        long key = -1;
        long[] c = null; // the chunk of va; may be one just emptied and removed (all zero then)
        long va = from;
        while (va < to) {
            long idx = (va - start) >>> pageShift;
            if (idx / CHUNK != key) {
                key = idx / CHUNK;
                c = chunks.get(key);
            }
            if (c == null) { // nothing mapped in this chunk: skip it whole
                run = unlink(run, va);
                va = Math.min(to, start + ((key + 1) * CHUNK << pageShift));
                continue;
            }
            long e = c[(int) (idx % CHUNK)];
            if (e == 0) {
                run = unlink(run, va);
            } else if (iovaBase >= 0) {
                run = run < 0 ? va : run;
            } else {
                device.dma().dmaUnmap(e & ODP_DMA_ADDR_MASK, per);
                setEntry(va, 0);
                npages--;
            }
            // dirtiness: a page mapped writable was faulted for write, which set its PTE dirty,
            // and cleaning it for writeback invalidates this mapping first (see Vmscan.msync),
            // so a page the device wrote is always dirty for the mm: no set_page_dirty needed
            va += page;
        }
        unlink(run, va);
    }

    /**
     * Unlinks the run of mapped granules [run, va) from the IOVA range, then clears their entries
     * (only once the unlink returned: an entry is never gone while its page is still mapped);
     * returns -1. Nothing when {@code run < 0}.
     */
    private long unlink(long run, long va) {
        if (run >= 0) {
            device.dma().dmaIovaUnlink(iovaBase + (run - start), (int) ((va - run) >>> Mm.PAGE_SHIFT));
            for (long a = run; a < va; a += 1L << pageShift) {
                setEntry(a, 0);
                npages--;
            }
        }
        return -1;
    }

    @Override
    public long dmaEntry(long va) {
        assert umemMutex.isHeldByCurrentThread();
        if (implicit || va < start || va >= end) {
            return 0;
        }
        return entry(va);
    }

    @Override
    public long nextMapped(long va, long bound) {
        assert umemMutex.isHeldByCurrentThread();
        if (implicit) {
            return -1;
        }
        long page = 1L << pageShift;
        long to = Math.min(bound, end);
        for (long at = Math.max(va, start) & -page; at < to; ) {
            long idx = (at - start) >>> pageShift;
            long[] c = chunks.get(idx / CHUNK);
            if (c == null) {
                at = start + ((idx / CHUNK + 1) * CHUNK << pageShift);
                continue;
            }
            if (c[(int) (idx % CHUNK)] != 0) {
                return at;
            }
            at += page;
        }
        return -1;
    }

    private long entry(long va) {
        long idx = (va - start) >>> pageShift;
        long[] c = chunks.get(idx / CHUNK);
        return c == null ? 0 : c[(int) (idx % CHUNK)];
    }

    private void setEntry(long va, long e) {
        long idx = (va - start) >>> pageShift;
        Long k = idx / CHUNK;
        long[] c = chunks.get(k);
        if (c == null) {
            if (e == 0) {
                return;
            }
            c = new long[CHUNK + 1];
            chunks.put(k, c);
        }
        int i = (int) (idx % CHUNK);
        if (c[i] == 0 && e != 0) {
            c[CHUNK]++;
        } else if (c[i] != 0 && e == 0 && --c[CHUNK] == 0) {
            chunks.remove(k);
            return;
        }
        c[i] = e;
    }

    @Override
    public void setSeq(long curSeq) {
        assert umemMutex.isHeldByCurrentThread();
        notifier.setSeq(curSeq);
    }

    @Override
    public void lock() {
        umemMutex.lock();
    }

    @Override
    public void unlock() {
        umemMutex.unlock();
    }

    @Override
    public boolean isLockedByCurrentThread() {
        return umemMutex.isHeldByCurrentThread();
    }

    @Override
    public long mappedPages() {
        umemMutex.lock();
        try {
            return npages;
        } finally {
            umemMutex.unlock();
        }
    }

    @Override
    public long metadataBytes() {
        umemMutex.lock();
        try {
            return chunks.size() * CHUNK_BYTES;
        } finally {
            umemMutex.unlock();
        }
    }

    @Override
    public void release() {
        if (umemMutex.isHeldByCurrentThread()) {
            throw new IllegalStateException("ib_umem_odp_release of " + this + " holding its umem mutex: the notifier removal would wait for it");
        }
        if (!released.compareAndSet(false, true)) {
            throw new IllegalStateException("ODP umem " + this + " released twice");
        }
        if (implicit) {
            return;
        }
        try {
            umemMutex.lock();
            try {
                unmapDmaPages(start, end);
            } finally {
                umemMutex.unlock();
            }
        } finally {
            notifier.remove(); // waits for a running callback; none runs after it
        }
        if (iovaBase >= 0) {
            device.dma().dmaIovaFree(iovaBase, end - start);
        }
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long length() {
        return length;
    }

    @Override
    public long start() {
        return start;
    }

    @Override
    public long end() {
        return end;
    }

    @Override
    public int pageShift() {
        return pageShift;
    }

    @Override
    public boolean writable() {
        return IbAccess.writable(access);
    }

    @Override
    public boolean isImplicit() {
        return implicit;
    }

    @Override
    public int pid() {
        return mm.pid();
    }

    @Override
    public String toString() {
        return implicit ? "implicit ODP umem of pid " + mm.pid()
                : String.format("ODP umem 0x%x-0x%x of pid %d (%s pages)", start, end, mm.pid(), pageShift == Mm.PAGE_SHIFT ? "4 KiB" : "2 MiB");
    }
}
