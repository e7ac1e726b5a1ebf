package ${package};

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.DeviceFile;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.kernel.dma.SgTable;

/**
 * The ${clientName} peer-memory client, generated from peerdirect's peer-client archetype: a copy
 * of the reference client ({@code samples/peer_memory/example_peer_mem.c}, peerdirect's
 * {@code example-peer-mem}) over host memory. Make its memory your device's and keep the
 * contract test ({@code PeerMemoryContractTest}) green.
 *
 * <p>The "device memory" is host frames this client allocates and maps into a process as a
 * device mapping ({@code VM_IO|VM_PFNMAP}), as a GPU driver maps its BAR: {@code pin_user_pages}
 * refuses such a range, so the IB core asks the peer clients, and this one claims it.
 *
 * <p>Lock rules: {@code this} guards the allocations and their sets of contexts; each
 * {@link Context}'s monitor guards its mapping. No lock of this client is held while calling
 * {@link PeerMemoryRegistration#invalidate}: the core may wait there for a registration still
 * being built, whose {@code dmaMap} needs our locks (the lock inversion of
 * Mellanox/nv_peer_memory#92). With {@link PeerMemoryClient#INVALIDATE_UNMAPS} the client unmaps
 * right after the invalidation returns; the core's own later {@code dmaUnmap}/{@code release}
 * may come before or after, so unmapping is idempotent under the context's monitor.
 */
public class PeerMemory implements PeerMemoryClient, PeerMemoryAllocator {

    /** One allocation: frames mapped into one process at [addr, addr+size). */
    static final class Region {
        final int pid;
        final long addr;
        final long size;
        final long[] pfns;
        final List<long[]> blocks = new ArrayList<>(); // {headPfn, order}
        final Set<Context> contexts = new HashSet<>();
        /** Being freed: no new registration may start on it. */
        boolean dead;
        /**
         * Its process exited while registrations still held it (a client without invalidation):
         * the frames go when the last registration is released, as nv-p2p's persistent pages do.
         */
        boolean orphaned;

        Region(int pid, long addr, long size, long[] pfns) {
            this.pid = pid;
            this.addr = addr;
            this.size = size;
            this.pfns = pfns;
        }
    }

    /** The client context of one registration: from acquire to release. */
    static final class Context {
        final Region region;
        final long addr;
        final long size;
        long ticket = -1;
        long iova;
        int mappedPages;
        DmaDevice device;

        Context(Region region, long addr, long size) {
            this.region = region;
            this.addr = addr;
            this.size = size;
        }

        /** Undoes dmaMap; a second call does nothing. */
        synchronized void unmap() {
            if (mappedPages > 0) {
                device.dma().dmaUnmap(iova, mappedPages);
                mappedPages = 0;
            }
        }
    }

    private final Mm mm;
    private final String name;
    private final long pageSize;
    private final int flags;
    private final Map<Integer, TreeMap<Long, Region>> regions = new java.util.HashMap<>();
    /** The device file each process with allocations holds open; guarded by {@code this}. */
    private final Map<Integer, DeviceFile> files = new java.util.HashMap<>();
    private volatile PeerMemoryRegistration registration;

    /**
     * @param pageSize the page size reported by getPageSize: 4096 or a larger power of two
     * @param unmaps   the {@link #INVALIDATE_UNMAPS} flavour
     */
    public PeerMemory(Mm mm, String name, long pageSize, boolean unmaps) {
        if (pageSize < SgTable.PAGE_SIZE || Long.bitCount(pageSize) != 1 || pageSize > (SgTable.PAGE_SIZE << Mm.MAX_ORDER)) {
            throw new IllegalArgumentException("page size " + pageSize + " must be a power of two from 4096 to 4 MiB");
        }
        this.mm = mm;
        this.name = name;
        this.pageSize = pageSize;
        this.flags = unmaps ? INVALIDATE_UNMAPS : 0;
    }

    // ------------------------------------------------------------------ the device side

    /**
     * Allocates {@code size} bytes (rounded up to the page size) of "device memory" and maps it
     * into process {@code pid}; returns its user address.
     */
    @Override
    public synchronized long alloc(int pid, long size) {
        AddressSpace as = mm.process(pid);
        if (size <= 0) {
            throw new KernelException(Errno.EINVAL, name + ": allocation size " + size + " must be positive");
        }
        long bytes = (size + pageSize - 1) & -pageSize;
        long npages = bytes / SgTable.PAGE_SIZE;
        long[] pfns = new long[Math.toIntExact(npages)];
        List<long[]> blocks = new ArrayList<>();
        List<MemorySegment> pieces = new ArrayList<>();
        try {
            int at = 0;
            while (at < npages) {
                int order = Math.min(Mm.MAX_ORDER, 63 - Long.numberOfLeadingZeros(npages - at));
                long head = mm.allocPages(order);
                blocks.add(new long[] {head, order});
                for (int i = 0; i < 1 << order; i++) {
                    pfns[at + i] = head + i;
                }
                pieces.add(mm.pageAddress(head, order));
                at += 1 << order;
            }
            deviceFile(as);
            // at an address aligned to the client's page size, as a GPU driver's VA allocator places it
            // (dmaMap's pages are pageSize-aligned addresses): a free range found, then mapped fixed inside it
            long probe = as.mmap(bytes + pageSize);
            as.munmap(probe, bytes + pageSize);
            long addr = as.mmapDevice((probe + pageSize - 1) & -pageSize, pieces, Vma.PROT_READ | Vma.PROT_WRITE, "[" + name + "]");
            Region r = new Region(pid, addr, bytes, pfns);
            r.blocks.addAll(blocks);
            regions.computeIfAbsent(pid, k -> new TreeMap<>()).put(addr, r);
            return addr;
        } catch (RuntimeException e) {
            for (long[] b : blocks) {
                mm.freePages(b[0], (int) b[1]);
            }
            throw e;
        }
    }

    /**
     * Frees an allocation: its registrations are invalidated first (a client without
     * invalidation refuses with EBUSY while any exists, like persistent GPU memory), then the
     * mapping and the frames go.
     */
    @Override
    public void free(int pid, long addr) {
        boolean invalidating = registration != null && registration.invalidationRequired();
        synchronized (this) {
            Region r = region(pid, addr);
            if (!invalidating && !r.contexts.isEmpty()) {
                throw new KernelException(Errno.EBUSY, String.format(
                        "%s: 0x%x has %d registrations and this client cannot invalidate: deregister the MRs first",
                        name, addr, r.contexts.size()));
            }
            r.dead = true; // registrations not yet past get_pages fail from now on
        }
        invalidate(pid, addr);
        synchronized (this) {
            Region r = region(pid, addr);
            for (Context c : r.contexts) {
                synchronized (c) {
                    if (c.mappedPages > 0) {
                        r.dead = false;
                        throw new KernelException(Errno.EBUSY, String.format("%s: 0x%x is still DMA-mapped by %s", name, addr, c.device.name()));
                    }
                }
            }
            forget(r);
            AddressSpace as = mm.findProcess(pid);
            if (as != null && !as.exited()) {
                as.munmap(r.addr, r.size);
            }
            freeFrames(r);
        }
    }

    /**
     * The process exited (its file table closed our device file): every allocation it had goes,
     * as a GPU driver frees a process's memory when its {@code /dev/nvidia*} file is released.
     * Registrations over it are invalidated first (an invalidating client); without invalidation
     * an allocation still registered is orphaned and freed by the release of its last
     * registration, so a killed process leaks nothing and no device loses memory under it.
     */
    void processExited(int pid) {
        List<Long> addrs;
        synchronized (this) {
            files.remove(pid);
            TreeMap<Long, Region> m = regions.get(pid);
            addrs = m == null ? List.of() : new ArrayList<>(m.keySet());
        }
        for (long addr : addrs) {
            invalidate(pid, addr);
            synchronized (this) {
                TreeMap<Long, Region> m = regions.get(pid);
                Region r = m == null ? null : m.get(addr);
                if (r == null) {
                    continue; // freed meanwhile by the client's own free
                }
                r.dead = true;
                forget(r);
                if (r.contexts.isEmpty()) {
                    freeFrames(r); // the mappings go with the process's exit right after this
                } else {
                    r.orphaned = true;
                }
            }
        }
    }

    /** Removes the allocation from the tables; its frames are freed separately. */
    private void forget(Region r) {
        assert Thread.holdsLock(this);
        TreeMap<Long, Region> m = regions.get(r.pid);
        m.remove(r.addr);
        if (m.isEmpty()) {
            regions.remove(r.pid);
        }
    }

    private void freeFrames(Region r) {
        assert Thread.holdsLock(this);
        for (long[] b : r.blocks) {
            mm.freePages(b[0], (int) b[1]);
        }
        r.blocks.clear();
    }

    /** Opens the process's device file on its first allocation ({@code open("/dev/example_peer")}). */
    private void deviceFile(AddressSpace as) {
        assert Thread.holdsLock(this);
        if (!files.containsKey(as.pid())) {
            DeviceFile f = new DeviceFile(() -> processExited(as.pid()));
            as.openFile(f);
            files.put(as.pid(), f);
        }
    }

    /**
     * Invalidates every registration of the allocation at {@code addr} (as a GPU driver does when
     * it moves or frees memory). Returns how many were invalidated. When it returns, no device
     * accesses the allocation through them.
     */
    public int invalidate(int pid, long addr) {
        PeerMemoryRegistration reg = registration;
        List<Context> targets;
        synchronized (this) {
            Region r = region(pid, addr);
            if (reg == null || !reg.invalidationRequired()) {
                return 0;
            }
            targets = new ArrayList<>(r.contexts);
        }
        int n = 0;
        for (Context c : targets) {
            long ticket;
            synchronized (c) {
                ticket = c.ticket;
            }
            if (ticket < 0) {
                continue; // acquire done, get_pages not yet: the core holds no ticket for it
            }
            reg.invalidate(ticket); // returns when the driver stopped DMA (and, without UNMAPS, after our dmaUnmap)
            n++;
            if ((flags & INVALIDATE_UNMAPS) != 0) {
                c.unmap(); // our own unmap; the core will not call dmaUnmap for it
            }
        }
        return n;
    }

    /**
     * Frees every allocation (the client is going away; the core has unregistered it, so no
     * registration is left).
     */
    public void freeAll() {
        registration = null;
        List<long[]> all = new ArrayList<>();
        synchronized (this) {
            regions.forEach((pid, m) -> m.keySet().forEach(a -> all.add(new long[] {pid, a})));
        }
        for (long[] r : all) {
            free((int) r[0], r[1]);
        }
        synchronized (this) {
            // the processes keep running without their device files' allocations
            files.forEach((pid, f) -> {
                AddressSpace as = mm.findProcess(pid);
                if (as != null) {
                    as.closeFile(f);
                }
            });
            files.clear();
        }
    }

    /** Allocations as lines: pid, address, size, registrations. */
    public synchronized List<String> list() {
        List<String> out = new ArrayList<>();
        regions.forEach((pid, m) -> m.values().forEach(r -> out.add(String.format("pid %d 0x%x %d bytes, %d registrations",
                pid, r.addr, r.size, r.contexts.size()))));
        return out;
    }

    public synchronized int regionCount() {
        return regions.values().stream().mapToInt(Map::size).sum();
    }


    private Region region(int pid, long addr) {
        TreeMap<Long, Region> m = regions.get(pid);
        Region r = m == null ? null : m.get(addr);
        if (r == null) {
            throw new KernelException(Errno.EINVAL, String.format("%s: no allocation at 0x%x in process %d", name, addr, pid));
        }
        return r;
    }

    // ------------------------------------------------------------------ the client contract

    @Override
    public String name() {
        return name;
    }

    @Override
    public String version() {
        return "1.0";
    }

    /** The page size {@code get_page_size} reports for every context. */
    long pageSize() {
        return pageSize;
    }

    @Override
    public int flags() {
        return flags;
    }

    @Override
    public void registered(PeerMemoryRegistration r) {
        registration = r;
    }

    /** Ours if the whole range lies in one allocation of that process. */
    @Override
    public synchronized Object acquire(int pid, long addr, long size) {
        TreeMap<Long, Region> m = regions.get(pid);
        Map.Entry<Long, Region> e = m == null ? null : m.floorEntry(addr);
        if (e == null || e.getValue().dead || addr + size > e.getValue().addr + e.getValue().size || addr + size < addr) {
            return null; // not mine
        }
        Context c = new Context(e.getValue(), addr, size);
        e.getValue().contexts.add(c);
        return c;
    }

    @Override
    public void getPages(long addr, long size, boolean write, boolean force, Object clientContext, long coreContext) {
        Context c = (Context) clientContext;
        if (addr != c.addr || size != c.size) {
            throw new KernelException(Errno.EINVAL, name + ": get_pages range differs from acquire");
        }
        // host frames of a device mapping need no pinning; remember the ticket to invalidate with
        synchronized (this) {
            if (c.region.dead) {
                throw new KernelException(Errno.EFAULT, String.format("%s: 0x%x is being freed", name, c.region.addr));
            }
            synchronized (c) {
                c.ticket = coreContext == PeerMemoryRegistry.NO_INVALIDATION_ID ? -1 : coreContext;
            }
        }
    }

    /** Maps the page-size-aligned range for the device; one entry per page of our page size. */
    @Override
    public SgTable dmaMap(Object clientContext, DmaDevice device) {
        Context c = (Context) clientContext;
        long start = c.addr & -pageSize;
        long end = (c.addr + c.size + pageSize - 1) & -pageSize;
        int first = Math.toIntExact((start - c.region.addr) / SgTable.PAGE_SIZE);
        int n = Math.toIntExact((end - start) / SgTable.PAGE_SIZE);
        long[] pfns = java.util.Arrays.copyOfRange(c.region.pfns, first, first + n);
        long iova = device.dma().dmaMapSg(pfns, DmaDirection.BIDIRECTIONAL);
        synchronized (c) {
            c.iova = iova;
            c.mappedPages = n;
            c.device = device;
        }
        int entries = Math.toIntExact((end - start) / pageSize);
        long[] a = new long[entries];
        long[] l = new long[entries];
        for (int i = 0; i < entries; i++) {
            a[i] = iova + i * pageSize;
            l[i] = pageSize;
        }
        return SgTable.of(a, l);
    }

    /** Idempotent: with INVALIDATE_UNMAPS we may have unmapped already. */
    @Override
    public void dmaUnmap(SgTable sg, Object clientContext, DmaDevice device) {
        ((Context) clientContext).unmap();
    }

    @Override
    public void putPages(SgTable sg, Object clientContext) {
        // nothing to unpin: this client owns its frames for the allocation's lifetime (a GPU driver
        // would drop its page-table reference here)
    }

    @Override
    public long getPageSize(Object clientContext) {
        return pageSize;
    }

    @Override
    public void release(Object clientContext) {
        Context c = (Context) clientContext;
        c.unmap(); // only for INVALIDATE_UNMAPS races: otherwise already unmapped
        synchronized (this) {
            c.region.contexts.remove(c);
            if (c.region.orphaned && c.region.contexts.isEmpty()) {
                freeFrames(c.region); // the last registration of a dead process's memory
            }
        }
    }
}
