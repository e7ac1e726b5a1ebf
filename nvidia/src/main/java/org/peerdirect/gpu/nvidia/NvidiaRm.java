package org.peerdirect.gpu.nvidia;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.peerdirect.gpu.ifc.GpuRegs;
import org.peerdirect.gpu.ifc.GpuRpc;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.DeviceFile;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The NVIDIA kernel driver's resource manager for one GPU ({@code nvidia.ko}'s RM): video-memory
 * allocations of processes at unified virtual addresses (the CUDA driver API's
 * {@code cuMemAlloc}/{@code cuMemFree}/{@code cuMemcpy*}), and the peer-to-peer API third-party
 * drivers use ({@code nv-p2p.h}: {@code nvidia_p2p_get_pages[_persistent]},
 * {@code nvidia_p2p_put_pages[_persistent]}, {@code nvidia_p2p_dma_map_pages},
 * {@code nvidia_p2p_dma_unmap_pages}).
 *
 * <h2>Peer-to-peer pinning ({@link NvP2p}, {@code nv-p2p.c})</h2>
 * {@code get_pages} maps the range's 64 KiB pages into free BAR1 slots (the aperture is limited:
 * a pin that does not fit fails with ENOMEM and changes nothing) and references the pages;
 * {@code dma_map_pages} maps those BAR1 slots into the peer device's IOMMU domain
 * ({@code dma_map_resource}); a peer's DMA then lands in video memory. Slots are handed out
 * cyclically, so a slot just unmapped is the last to be reused and a stray peer access to it is
 * caught by the IOMMU audit rather than landing in someone else's page.
 *
 * <p>Two kinds of pins, as {@code nv-p2p.h} documents: with a free callback (the invalidating
 * kind) a {@code cuMemFree} of the range, or the exit of its process, calls the callback
 * synchronously, and only after it returns does the RM tear down the DMA mappings, the BAR1 slots
 * and the pages itself (a later {@code put_pages} returns success and does nothing, as for
 * {@code NV_ERR_OBJECT_NOT_FOUND}). A <em>persistent</em> pin has no callback: the free succeeds,
 * the address range goes, and the pages stay referenced, mapped and reachable until
 * {@code put_pages_persistent}. A NULL callback to the non-persistent call is refused (EINVAL), as
 * since CUDA 12.2, which removed the race of R515-R535 between the callback and
 * {@code put_pages}.
 *
 * <h2>dma-buf</h2>
 * {@link #cuMemGetHandleForAddressRange} exports a range of an allocation as a dma-buf
 * ({@code CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD}): the buffer references its pages (a free of the
 * allocation leaves them to the buffer until its last reference goes); an importer must allow
 * peer-to-peer (video memory cannot be migrated to system memory here); mapping an attachment
 * takes BAR1 slots and maps them into the importer's domain; {@link #dmaBufEvictBar1} takes the
 * slots back from dynamic importers ({@code move_notify}: the next access re-maps); the GPU going
 * revokes every exported buffer.
 *
 * <h2>The GPU</h2>
 * The RM reaches its GPU only through the PCI function ({@link GpuFw}): the model's queues in
 * kernel memory set up through BAR0, commands for video-memory pages, BAR1 slots and the copy
 * engine (host bytes go through a staging buffer the GPU reaches by DMA), answers woken by MSI-X;
 * {@code cuMemAlloc}'s device mapping comes from the model's CPU window (BAR2).
 *
 * <h2>Cost model</h2>
 * Pinning GPU memory in the BAR is "an expensive operation, taking up to milliseconds" (GPUDirect
 * RDMA documentation): each pin is charged {@value #PIN_BASE_NS} ns plus {@value #PIN_PAGE_NS} ns
 * per 64 KiB page, reported ({@link #modelledPinNanos}, {@code gpu:smi}) and never slept.
 *
 * <h2>Locks</h2>
 * {@code this} (the RM lock) guards every table here. It is never held while a free callback
 * runs: the callback goes into the IB core, which may wait for a registration that is itself in
 * {@code get_pages}/{@code dma_map_pages} and needs this lock (the lock inversion of
 * Mellanox/nv_peer_memory#92). Mapping and unmapping in a peer's IOMMU domain happen under it
 * (the IOMMU never calls back).
 */
public final class NvidiaRm {

    /** {@code nvidia_p2p_page_table.page_size}: {@code NVIDIA_P2P_PAGE_SIZE_64KB}. */
    public static final long P2P_PAGE_SIZE = GpuRpc.PAGE_SIZE;
    public static final long PIN_BASE_NS = 20_000;
    public static final long PIN_PAGE_NS = 2_000;
    /** Where unified addresses of device memory start in a process (CUDA reserves a range like it). */
    static final long UVA_BASE = 0x3_0200_0000L;
    /** Device allocations are aligned to 2 MiB in the unified address space, as CUDA does. */
    static final long UVA_ALIGN = 2L << 20;

    private final Mm mm;
    private final PciFunction fn;
    /** The GPU's firmware, reached through BAR0, the queues in memory and MSI-X. */
    private final GpuFw gpu;
    /** The books of video-memory pages and BAR1 slots. */
    private final GpuMemory mem;
    private final NvDmaBuf dmabufs;
    private final String name;
    private final int index;
    private final Map<Integer, TreeMap<Long, NvAllocation>> allocations = new HashMap<>();
    private final Map<Integer, DeviceFile> files = new HashMap<>();
    private final Map<Integer, Long> uvaCursor = new HashMap<>();
    /** nv-p2p.c's part: pins, their DMA mappings and puts. */
    private final NvP2p p2p;
    private long freeCallbacks;

    public NvidiaRm(Mm mm, PciFunction fn, int index) {
        this.mm = mm;
        this.fn = fn;
        this.name = fn.name();
        this.gpu = new GpuFw(name, mm, fn);
        this.index = index;
        this.mem = new GpuMemory(this, name, gpu);
        this.dmabufs = new NvDmaBuf(this, name, fn, mem);
        this.p2p = new NvP2p(this, fn, mem, gpu);
    }

    public int index() {
        return index;
    }

    public String name() {
        return name;
    }

    public PciFunction function() {
        return fn;
    }

    // ------------------------------------------------------------------ the CUDA driver API's part

    /**
     * {@code cuMemAlloc}: {@code bytes} of video memory (rounded up to 64 KiB) mapped into
     * {@code proc} at a 2 MiB-aligned unified address as a device mapping without CPU access:
     * {@code pin_user_pages} refuses it, so an RDMA registration takes the peer path.
     *
     * @throws KernelException EINVAL for a size that is not positive, ENOMEM when video memory is short
     */
    public synchronized long cuMemAlloc(AddressSpace proc, long bytes) {
        if (bytes <= 0 || bytes > (long) gpu.vramPages * P2P_PAGE_SIZE) {
            throw new KernelException(bytes <= 0 ? Errno.EINVAL : Errno.ENOMEM,
                    String.format("cuMemAlloc of %d bytes on %s: CUDA_ERROR_%s", bytes, name(), bytes <= 0 ? "INVALID_VALUE" : "OUT_OF_MEMORY"));
        }
        long size = (bytes + P2P_PAGE_SIZE - 1) & -P2P_PAGE_SIZE;
        int n = (int) (size / P2P_PAGE_SIZE);
        int[] pages = mem.allocPages(n);
        try {
            deviceFile(proc);
            long va = mapUva(proc, size, pages);
            NvAllocation a = new NvAllocation(proc.pid(), va, size, pages);
            allocations.computeIfAbsent(proc.pid(), k -> new TreeMap<>()).put(va, a);
            return va;
        } catch (RuntimeException e) {
            mem.freePages(pages);
            throw e;
        }
    }

    /**
     * Maps the pages at the process's next 2 MiB-aligned unified address, PROT_NONE: each run of
     * consecutive pages as the GPU's CPU window (BAR2, the model's own) shows it, mapped with
     * {@code ioremap} of those BAR pages (the window never moves its pages). A PCIe
     * CPU cannot reach the memory; the mapping only makes the range a device mapping.
     */
    private long mapUva(AddressSpace proc, long size, int[] pages) {
        List<java.lang.foreign.MemorySegment> pieces = new ArrayList<>();
        int i = 0;
        while (i < pages.length) {
            int j = i + 1;
            while (j < pages.length && pages[j] == pages[j - 1] + 1) {
                j++;
            }
            try {
                // io_remap_pfn_range of the window's BAR pages: the window never moves them, so ioremap takes the run
                pieces.add(fn.ioremap(GpuRegs.CPU_WINDOW_BAR, pages[i] * P2P_PAGE_SIZE, (j - i) * P2P_PAGE_SIZE));
            } catch (IllegalArgumentException | IllegalStateException e) {
                throw new KernelException(Errno.ENODEV, String.format("cuMemAlloc on %s: its CPU window does not show pages %d+%d (the GPU is gone?): %s",
                        name(), pages[i], j - i, e.getMessage()));
            }
            i = j;
        }
        long cursor = uvaCursor.getOrDefault(proc.pid(), UVA_BASE);
        for (int tries = 0; tries < 1 << 16; tries++) {
            try {
                long va = proc.mmapDevice(cursor, pieces, Vma.PROT_NONE, "[nvidia-uvm " + name() + "]");
                uvaCursor.put(proc.pid(), (va + size + UVA_ALIGN - 1) & -UVA_ALIGN);
                return va;
            } catch (KernelException overlap) {
                if (overlap.errno() != Errno.EINVAL) {
                    throw overlap;
                }
                cursor += UVA_ALIGN; // the process has something there: try the next 2 MiB
            }
        }
        throw new KernelException(Errno.ENOMEM, "cuMemAlloc: no free unified address range in process " + proc.pid());
    }

    /**
     * {@code cuMemFree}: the invalidating pins of the allocation get their free callback first
     * (synchronously, without the RM lock), then the RM unmaps what they had mapped, the
     * address range goes, and pages nobody pins any more are free. Persistent pins keep their
     * pages until {@code put_pages_persistent}.
     *
     * @throws KernelException EINVAL when {@code dptr} is not the start of an allocation of that process
     */
    public void cuMemFree(AddressSpace proc, long dptr) {
        free(proc.pid(), dptr);
    }

    private void free(int pid, long dptr) {
        NvAllocation a;
        List<NvidiaP2pPageTable> callbacks;
        synchronized (this) {
            a = allocation(pid, dptr);
            if (a.freed) {
                throw new KernelException(Errno.EINVAL, String.format("cuMemFree(0x%x): CUDA_ERROR_INVALID_VALUE (being freed already)", dptr));
            }
            a.freed = true; // no pin may start on it from now on
            callbacks = a.tables.stream().filter(t -> !t.persistent() && !t.put && !t.unlinked).toList();
        }
        for (NvidiaP2pPageTable t : callbacks) {
            t.callback.free(); // the client invalidates; when this returns no peer accesses the pages
        }
        synchronized (this) {
            freeCallbacks += callbacks.size();
            for (NvidiaP2pPageTable t : callbacks) {
                if (!t.put && !t.unlinked) {
                    p2p.tearDown(t);
                    t.unlinked = true;
                }
            }
            TreeMap<Long, NvAllocation> m = allocations.get(a.pid);
            m.remove(a.va);
            if (m.isEmpty()) {
                allocations.remove(a.pid);
            }
            AddressSpace as = mm.findProcess(a.pid);
            if (as != null && !as.exited()) {
                as.munmap(a.va, a.size);
            }
            mem.unref(a.pages); // a page a persistent pin holds stays, an orphan, until its put_pages
        }
    }

    /** {@code cuMemcpyHtoD}: host bytes into device memory at {@code dst} of the process. */
    public void cuMemcpyHtoD(AddressSpace proc, long dst, byte[] src, int off, int len) {
        java.util.Objects.checkFromIndexSize(off, len, src.length);
        gpu.copy(pieces(proc, dst, len), src, off, true);
    }

    /** {@code cuMemcpyDtoH}: device memory at {@code src} of the process into host bytes. */
    public void cuMemcpyDtoH(AddressSpace proc, byte[] dst, int off, long src, int len) {
        java.util.Objects.checkFromIndexSize(off, len, dst.length);
        gpu.copy(pieces(proc, src, len), dst, off, false);
    }

    /** {@code cuMemcpyDtoD}: within the GPU, between two allocations (or one) of the process, through the copy engine. */
    public void cuMemcpyDtoD(AddressSpace proc, long dst, long src, long len) {
        if (len <= 0) {
            return; // nothing to copy, as cudaMemcpy of 0 bytes
        }
        List<GpuFw.Piece> from = pieces(proc, src, len);
        List<GpuFw.Piece> to = pieces(proc, dst, len);
        // split both at every page boundary of either side: each pair lies within one page on each side
        List<GpuFw.Piece[]> pairs = new ArrayList<>();
        int i = 0;
        int j = 0;
        int si = 0;
        int sj = 0;
        while (i < from.size()) {
            GpuFw.Piece a = from.get(i);
            GpuFw.Piece b = to.get(j);
            int n = Math.min(a.len() - si, b.len() - sj);
            pairs.add(new GpuFw.Piece[] {new GpuFw.Piece(a.page(), a.off() + si, n), new GpuFw.Piece(b.page(), b.off() + sj, n)});
            si += n;
            sj += n;
            if (si == a.len()) {
                i++;
                si = 0;
            }
            if (sj == b.len()) {
                j++;
                sj = 0;
            }
        }
        gpu.copyDevice(pairs);
    }

    /** The pieces of [va, va+len) within one 64 KiB page each; the range must be one live allocation's. */
    private List<GpuFw.Piece> pieces(AddressSpace proc, long va, long len) {
        NvAllocation a;
        synchronized (this) {
            a = containing(proc.pid(), va, len, "cuMemcpy");
        }
        List<GpuFw.Piece> out = new ArrayList<>();
        long done = 0;
        while (done < len) {
            long at = va + done - a.va;
            int page = a.pages[(int) (at / P2P_PAGE_SIZE)];
            int pageOff = (int) (at % P2P_PAGE_SIZE);
            int n = (int) Math.min(len - done, P2P_PAGE_SIZE - pageOff);
            out.add(new GpuFw.Piece(page, pageOff, n));
            done += n;
        }
        return out;
    }

    private NvAllocation allocation(int pid, long dptr) {
        assert Thread.holdsLock(this);
        TreeMap<Long, NvAllocation> m = allocations.get(pid);
        NvAllocation a = m == null ? null : m.get(dptr);
        if (a == null) {
            throw new KernelException(Errno.EINVAL, String.format("0x%x is not a device allocation of process %d on %s: CUDA_ERROR_INVALID_VALUE",
                    dptr, pid, name()));
        }
        return a;
    }

    /** The live allocation holding all of [va, va+len), else EINVAL naming the range. */
    NvAllocation containing(int pid, long va, long len, String what) {
        assert Thread.holdsLock(this);
        TreeMap<Long, NvAllocation> m = allocations.get(pid);
        Map.Entry<Long, NvAllocation> e = m == null ? null : m.floorEntry(va);
        NvAllocation a = e == null ? null : e.getValue();
        if (a == null || a.freed || len <= 0 || va + len > a.va + a.size || va + len < va) {
            throw new KernelException(Errno.EINVAL, String.format("%s: 0x%x+0x%x is not inside one device allocation of process %d on %s",
                    what, va, len, pid, name()));
        }
        return a;
    }

    // ------------------------------------------------------------------ nv-p2p.h ({@link NvP2p}, nv-p2p.c)

    /**
     * {@code nvidia_p2p_get_pages(0, 0, va, length, &page_table, free_callback, data)}.
     *
     * @throws KernelException EINVAL for an unaligned range ("address or length are not aligned"),
     *                         a range outside one live allocation or a null callback (CUDA 12.2+);
     *                         ENOMEM when the BAR1 aperture has too few free slots
     */
    public NvidiaP2pPageTable getPages(int pid, long va, long length, NvidiaP2pFreeCallback callback) {
        if (callback == null) {
            throw new KernelException(Errno.EINVAL, "nvidia_p2p_get_pages: a free callback is required (use the persistent API without one)");
        }
        return p2p.pin(pid, va, length, callback);
    }

    /** {@code nvidia_p2p_get_pages_persistent(va, length, &page_table, 0)}: no callback, kept until put. */
    public NvidiaP2pPageTable getPagesPersistent(int pid, long va, long length) {
        return p2p.pin(pid, va, length, null);
    }

    /**
     * {@code nvidia_p2p_put_pages}: unpins. A table the RM already tore down after a free
     * callback returns quietly (nv-p2p.c maps {@code NV_ERR_OBJECT_NOT_FOUND} to success).
     *
     * @throws KernelException EINVAL for a persistent table or a second put, EBUSY while it is still DMA-mapped
     */
    public void putPages(NvidiaP2pPageTable t) {
        p2p.put(t, false);
    }

    /** {@code nvidia_p2p_put_pages_persistent}: unpins a persistent table; its orphaned pages (freed meanwhile) are freed now. */
    public void putPagesPersistent(NvidiaP2pPageTable t) {
        p2p.put(t, true);
    }

    /**
     * {@code nvidia_p2p_dma_map_pages(peer, page_table, &mapping)}: the pinned pages' BAR1 slots
     * mapped into the peer device's IOMMU domain; one bus address per 64 KiB page.
     */
    public NvidiaP2pDmaMapping dmaMapPages(DmaMapper peer, NvidiaP2pPageTable t) {
        return p2p.dmaMapPages(peer, t);
    }

    /** {@code nvidia_p2p_dma_unmap_pages}: a mapping the RM already tore down (after a free callback) returns quietly. */
    public void dmaUnmapPages(NvidiaP2pDmaMapping m) {
        p2p.dmaUnmapPages(m);
    }

    /**
     * The GPU of {@code gpus} whose allocation holds [va, va+length) of process {@code pid}: what
     * the CUDA driver finds from a unified address before it frees or copies. When none does,
     * GPU 0: its call then refuses the address in its own words (not an allocation, being freed).
     *
     * @throws KernelException ENODEV without a GPU
     */
    public static NvidiaRm owner(List<NvidiaRm> gpus, int pid, long va, long length, String what) {
        if (gpus.isEmpty()) {
            throw new KernelException(Errno.ENODEV, what + ": no GPU (cudaErrorNoDevice)");
        }
        for (NvidiaRm rm : gpus) {
            if (rm.owns(pid, va, length)) {
                return rm;
            }
        }
        return gpus.get(0);
    }

    /**
     * GPU {@code index} of {@code gpus} ({@code cudaSetDevice}).
     *
     * @throws KernelException ENODEV for an index no GPU has
     */
    public static NvidiaRm device(List<NvidiaRm> gpus, int index) {
        if (index < 0 || index >= gpus.size()) {
            throw new KernelException(Errno.ENODEV, "GPU " + index + ": cudaErrorInvalidDevice (" + gpus.size() + " GPU(s): "
                    + (gpus.isEmpty() ? "none" : "0.." + (gpus.size() - 1)) + ")");
        }
        return gpus.get(index);
    }

    /**
     * Whether [va, va+length) lies in one live allocation of the process: the question
     * nvidia-peermem's {@code acquire} asks by a get/put probe, without the probe's cost.
     */
    public synchronized boolean owns(int pid, long va, long length) {
        try {
            containing(pid, va, length, "probe");
            return true;
        } catch (KernelException e) {
            return false;
        }
    }

    // ------------------------------------------------------------------ dma-buf export ({@link NvDmaBuf})

    /**
     * {@code cuMemGetHandleForAddressRange(&fd, dptr, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)}:
     * [dptr, dptr+size) of one allocation as a dma-buf, open in {@code proc} under the returned
     * descriptor. {@code dptr} and {@code size} must be aligned to the host page size (4 KiB).
     *
     * @throws KernelException EINVAL for an unaligned range or one outside a live allocation
     */
    public int cuMemGetHandleForAddressRange(AddressSpace proc, long dptr, long size) {
        org.peerdirect.kernel.dmabuf.DmaBuf buf;
        synchronized (this) {
            dmabufs.checkOpen();
            if ((dptr & 4095) != 0 || (size & 4095) != 0 || size <= 0) {
                throw new KernelException(Errno.EINVAL, String.format(
                        "cuMemGetHandleForAddressRange(0x%x, %d): CUDA_ERROR_INVALID_VALUE (not aligned to the host page size)", dptr, size));
            }
            NvAllocation a = containing(proc.pid(), dptr, size, "cuMemGetHandleForAddressRange");
            int first = (int) ((dptr - a.va) / P2P_PAGE_SIZE);
            int last = (int) ((dptr + size - 1 - a.va) / P2P_PAGE_SIZE);
            int[] pages = java.util.Arrays.copyOfRange(a.pages, first, last + 1);
            buf = dmabufs.export(pages, (dptr - a.va) % P2P_PAGE_SIZE, size);
        }
        // a descriptor that cannot be installed (the process is exiting) drops the only reference:
        // the buffer is released then, once
        return buf.fd(proc);
    }

    /**
     * The RM takes BAR1 back from the dma-buf open under {@code fd} (BAR1 pressure): under the
     * buffer's reservation lock every importer is told to move ({@code move_notify}) and unmaps,
     * which frees the slots; the next access of a dynamic importer maps it again. Returns the
     * slots freed.
     *
     * @throws IllegalStateException when an importer pinned the buffer (it cannot move)
     */
    public int dmaBufEvictBar1(AddressSpace proc, int fd) {
        return dmabufs.evictBar1(proc, fd);
    }

    // ------------------------------------------------------------------ process lifetime

    private void deviceFile(AddressSpace as) {
        assert Thread.holdsLock(this);
        if (!files.containsKey(as.pid())) {
            DeviceFile f = new DeviceFile(() -> processExited(as.pid()));
            as.openFile(f);
            files.put(as.pid(), f);
        }
    }

    /** Early process exit: every allocation freed as by cuMemFree (free callbacks included). */
    void processExited(int pid) {
        List<Long> vas;
        synchronized (this) {
            files.remove(pid);
            uvaCursor.remove(pid);
            TreeMap<Long, NvAllocation> m = allocations.get(pid);
            vas = m == null ? List.of() : new ArrayList<>(m.keySet());
        }
        for (long va : vas) {
            try {
                free(pid, va);
            } catch (KernelException gone) {
                // freed meanwhile by a cuMemFree of its own
            }
        }
    }

    /**
     * The GPU goes away (driver unbind): every process's allocations are freed (free callbacks
     * first); persistent pins still held are reported, since their pages cannot outlive the card.
     */
    public List<String> shutdown() {
        List<String> stuck = dmabufs.revokeAll(); // importers let go before the memory does
        Map<Integer, DeviceFile> open;
        synchronized (this) {
            open = new HashMap<>(files);
        }
        for (Map.Entry<Integer, DeviceFile> e : open.entrySet()) {
            processExited(e.getKey()); // outside the RM lock: it runs free callbacks (see the class comment)
            AddressSpace as = mm.findProcess(e.getKey());
            if (as != null) {
                as.closeFile(e.getValue()); // the process keeps running without our device file
            }
        }
        List<String> left = new ArrayList<>(stuck);
        synchronized (this) {
            // pages only revoked dma-bufs still open hold are not leaks: their descriptors keep them until closed
            BitSet held = mem.usedPages();
            held.andNot(dmabufs.pages());
            if (held.cardinality() > 0) {
                left.add(String.format("%s: %d pages of video memory still referenced at shutdown (persistent pins not put)", name(),
                        held.cardinality()));
            }
            GpuFw.Stats st = gpu.stats();
            if (st != null && st.bar1Mapped() > 0) {
                left.add(String.format("%s: %d BAR1 slots still mapped at shutdown", name(), st.bar1Mapped()));
            }
        }
        gpu.close(); // the queues off, their memory unmapped and freed; what is put later is only the RM's tables
        return left;
    }

    // ------------------------------------------------------------------ nvidia-smi

    /** What {@code gpu:smi} shows of this GPU. */
    public record Smi(String name, String bdf, long vramBytes, long usedBytes, long bar1Bytes, long bar1UsedBytes, long committedBytes,
            int allocations, int pinnedTables, long pins, long modelledPinNanos, long freeCallbacks, long orphanBytes, List<String> pinned,
            int dmabufs, int dmabufMappings, int dmaPages) {
    }

    public synchronized Smi smi() {
        int allocs = 0;
        int tables = 0;
        List<String> pinned = new ArrayList<>();
        BitSet orphans = mem.usedPages(); // pages in use that no live allocation holds: kept by persistent pins
        for (TreeMap<Long, NvAllocation> m : allocations.values()) {
            for (NvAllocation a : m.values()) {
                allocs++;
                for (int p : a.pages) {
                    orphans.clear(p);
                }
                for (NvidiaP2pPageTable t : a.tables) {
                    tables++;
                    pinned.add(String.format("pid %d 0x%x-0x%x %s%s", a.pid, t.va, t.va + t.length, t.persistent() ? "persistent" : "callback",
                            t.mappings.isEmpty() ? "" : ", DMA-mapped for " + t.mappings.size() + " peer(s)"));
                }
            }
        }
        return new Smi(name(), fn.bdf(), (long) gpu.vramPages * P2P_PAGE_SIZE, (long) mem.usedPageCount() * P2P_PAGE_SIZE,
                (long) gpu.bar1Slots * P2P_PAGE_SIZE, (long) mem.usedSlotCount() * P2P_PAGE_SIZE, committed(), allocs, tables,
                p2p.pins(), p2p.modelledPinNanos(), freeCallbacks, orphans.cardinality() * P2P_PAGE_SIZE, pinned, dmabufs.count(),
                dmabufs.mappings(), gpu.dmaPages());
    }

    /** What the GPU committed of the host's memory; 0 once it is gone. */
    private long committed() {
        GpuFw.Stats st = gpu.stats();
        return st == null ? 0 : st.committedBytes();
    }

    /** Modelled time spent pinning BAR1 pages so far (never slept). */
    public synchronized long modelledPinNanos() {
        return p2p.modelledPinNanos();
    }

    public synchronized int usedPages() {
        return mem.usedPageCount();
    }

    public synchronized int usedSlots() {
        return mem.usedSlotCount();
    }
}
