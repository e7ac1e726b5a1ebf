package org.peerdirect.ssd.nvme;

import static org.peerdirect.ssd.regs.NvmeRegs.NVME_REG_CAP;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.DeviceFile;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.ssd.nvme.host.NvmeDev;
import org.peerdirect.ssd.nvme.host.Pmr;

/**
 * The NVMe driver's part for one controller's persistent memory region ({@code drivers/pci/p2pdma.c}
 * over the controller {@code drivers/nvme/host/pci.c} brings up, {@link NvmeDev}): enables the PMR
 * through its registers ({@code PMRCAP}, {@code PMRCTL}, {@code PMRSTS}), maps PMR ranges into
 * processes ({@code io_remap_pfn_range} of the BAR {@code PMRCAP.BIR} names, through
 * {@link PciFunction#ioremap}; {@code mmap} of the region at a fixed offset, as of a DAX device,
 * or {@code pci_alloc_p2pmem}-style first-fit allocation), pins ranges for a peer
 * device and maps them into the peer's IOMMU domain ({@code pci_p2pdma_map}: {@code dma_map_resource}
 * of the PMR BAR), and makes posted writes persistent by the PMR's write barrier (a read of
 * {@code PMRSTS}).
 *
 * <p>A range freed while a peer has it pinned first runs the pin's invalidation, synchronously and
 * without this driver's lock (the peer client calls into the IB core, which may wait for the MR;
 * holding our lock there would invert with a registration that waits for us), then unmaps what the
 * client left mapped, then unmaps the range from the process. Process exit frees like an unmap.
 *
 * <p>Lock: {@code this} guards the region table, pins and mappings; it is never held while an
 * invalidation runs.
 */
public final class NvmePmr {

    public static final long PAGE = 4096;

    /** A PMR range mapped into a process. */
    public static final class Region {
        final int pid;
        final long va;
        final long offset;
        final long length;
        final List<Pin> pins = new ArrayList<>();
        boolean freed;
        /** dma-bufs exported from it not yet released: the PMR range stays reserved after an unmap until they go. */
        int exports;

        Region(int pid, long va, long offset, long length) {
            this.pid = pid;
            this.va = va;
            this.offset = offset;
            this.length = length;
        }
    }

    /** A peer's pin of part of a region ({@code p2pmem} pages referenced), with its invalidation. */
    public static final class Pin {
        final Region region;
        final long offset;
        final long length;
        final Runnable invalidate;
        final List<Mapping> mappings = new ArrayList<>();
        boolean put;

        Pin(Region region, long offset, long length, Runnable invalidate) {
            this.region = region;
            this.offset = offset;
            this.length = length;
            this.invalidate = invalidate;
        }


        public long length() {
            return length;
        }
    }

    /** A pin mapped into one peer's IOMMU domain: one bus-address range. */
    public static final class Mapping {
        final Pin pin;
        final DmaMapper peer;
        final long iova;
        boolean unmapped;

        Mapping(Pin pin, DmaMapper peer, long iova) {
            this.pin = pin;
            this.peer = peer;
            this.iova = iova;
        }

        public long iova() {
            return iova;
        }
    }

    private final Mm mm;
    private final PciFunction fn;
    private final int index;
    private final int bar;
    private final long pmrBytes;
    /** The controller: registers and admin queue. */
    private final NvmeDev dev;
    /** PMR offset → region. */
    private final TreeMap<Long, Region> regions = new TreeMap<>();
    /** pid → (va → region). */
    private final Map<Integer, TreeMap<Long, Region>> byProcess = new HashMap<>();
    private final Map<Integer, DeviceFile> files = new HashMap<>();
    /** The region's registers and BAR. */
    private final Pmr pmr;
    private long barriers;
    private long invalidations;
    private long pins;
    private long mmioBytes;

    /**
     * Probe: the controller must announce a PMR ({@code CAP.PMRS}) on a BAR it implements with the
     * {@code PMRSTS}-read write barrier; the controller is brought up ({@link NvmeDev}: admin
     * queue, Identify) and the PMR enabled ({@code PMRCTL.EN}, {@code PMRSTS.NRDY} 0 within
     * {@code PMRCAP.PMRTO}).
     */
    public NvmePmr(Mm mm, PciFunction fn, int index) {
        this.mm = mm;
        this.fn = fn;
        this.index = index;
        long cap = fn.read64(0, NVME_REG_CAP);
        if (cap == -1L) {
            throw new KernelException(Errno.ENODEV, name() + ": controller at " + fn.bdf() + " reads all ones (gone)");
        }
        this.pmr = new Pmr(fn, name(), cap);
        this.bar = pmr.bar();
        this.pmrBytes = pmr.bytes();
        this.dev = new NvmeDev(mm, fn, name(), () -> {
            if (!shuttingDown) {
                pmr.enableIfOff();
            }
        });
        try {
            pmr.enable();
        } catch (RuntimeException e) {
            dev.shutdown();
            throw e;
        }
    }

    /** {@code nvme0}, {@code nvme1}: in probe order. */
    public String name() {
        return "nvme" + index;
    }

    public int index() {
        return index;
    }

    public String bdf() {
        return fn.bdf();
    }

    public long pmrBytes() {
        return pmrBytes;
    }

    // ------------------------------------------------------------------ user mappings

    /**
     * Maps PMR [offset, offset+length) into the process, read/write, as {@code mmap} of the region's
     * device file at that offset: the same offset names the same persistent bytes in every run.
     * A range overlapping one mapped already is EBUSY.
     */
    public synchronized long mmap(AddressSpace proc, long offset, long length) {
        if (offset < 0 || length <= 0 || offset % PAGE != 0 || length % PAGE != 0 || offset + length > pmrBytes || offset + length < 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: PMR range 0x%x+0x%x must be page-aligned and inside the %d-byte region",
                    name(), offset, length, pmrBytes));
        }
        var below = regions.floorEntry(offset + length - 1);
        if (below != null && below.getValue().offset + below.getValue().length > offset) {
            Region r = below.getValue();
            throw new KernelException(Errno.EBUSY, String.format("%s: PMR 0x%x+0x%x overlaps 0x%x+0x%x, mapped by pid %d at 0x%x",
                    name(), offset, length, r.offset, r.length, r.pid, r.va));
        }
        return map(proc, offset, length);
    }

    /** Maps a free PMR range of {@code length} (rounded up to pages), the lowest that fits. */
    public synchronized long alloc(AddressSpace proc, long length) {
        if (length <= 0 || length > pmrBytes) {
            throw new KernelException(Errno.EINVAL, String.format("%s: cannot allocate %d bytes of a %d-byte PMR", name(), length, pmrBytes));
        }
        long len = (length + PAGE - 1) & -PAGE;
        long at = 0;
        long largest = 0;
        for (Region r : regions.values()) {
            if (r.offset - at >= len) {
                break;
            }
            largest = Math.max(largest, r.offset - at);
            at = r.offset + r.length;
        }
        if (pmrBytes - at < len) {
            throw new KernelException(Errno.ENOMEM, String.format("%s: no free PMR range of %d bytes (largest free: %d)", name(), len,
                    Math.max(largest, pmrBytes - at)));
        }
        return map(proc, at, len);
    }

    private long map(AddressSpace proc, long offset, long length) {
        assert Thread.holdsLock(this);
        if (!fn.present()) {
            throw new KernelException(Errno.ENODEV, name() + ": the controller is gone");
        }
        long va = proc.mmapDevice(0, pmr.ioremap(offset, length), Vma.PROT_READ | Vma.PROT_WRITE, "[" + name() + " pmr]");
        Region r = new Region(proc.pid(), va, offset, length);
        regions.put(offset, r);
        byProcess.computeIfAbsent(proc.pid(), p -> new TreeMap<>()).put(va, r);
        if (!files.containsKey(proc.pid())) {
            DeviceFile f = new DeviceFile(() -> processExited(proc.pid()));
            proc.openFile(f);
            files.put(proc.pid(), f);
        }
        return va;
    }

    /** The PMR offset of {@code va} in the process, or -1 when no mapping of this PMR holds it. */
    public synchronized long pmrOffset(int pid, long va) {
        Region r = containing(pid, va, 1);
        return r == null ? -1 : r.offset + (va - r.va);
    }

    private Region containing(int pid, long va, long length) {
        assert Thread.holdsLock(this);
        TreeMap<Long, Region> m = byProcess.get(pid);
        var e = m == null ? null : m.floorEntry(va);
        if (e == null) {
            return null;
        }
        Region r = e.getValue();
        return length > 0 && va - r.va + length <= r.length && !r.freed ? r : null;
    }

    /** Whether [va, va+length) lies in one live mapping of this PMR in the process. */
    public synchronized boolean owns(int pid, long va, long length) {
        return containing(pid, va, length) != null;
    }

    /**
     * Unmaps the mapping that starts at {@code va}: the peers' pins on it are invalidated first
     * (see the class comment); the bytes stay in the PMR.
     */
    public void munmap(int pid, long va) {
        Region r;
        List<Pin> live;
        synchronized (this) {
            TreeMap<Long, Region> m = byProcess.get(pid);
            r = m == null ? null : m.get(va);
            if (r == null || r.freed) {
                throw new KernelException(Errno.EINVAL, String.format("%s: pid %d has no PMR mapping starting at 0x%x", name(), pid, va));
            }
            r.freed = true; // no pin may start on it from now on
            live = r.pins.stream().filter(p -> !p.put).toList();
        }
        for (Pin p : live) {
            p.invalidate.run(); // when this returns no peer reaches the range
        }
        synchronized (this) {
            invalidations += live.size();
            for (Pin p : r.pins) {
                unpinLocked(p);
            }
            r.pins.clear();
            if (r.exports == 0) {
                regions.remove(r.offset);
            }
            TreeMap<Long, Region> m = byProcess.get(pid);
            m.remove(va);
            if (m.isEmpty()) {
                byProcess.remove(pid);
            }
            AddressSpace as = mm.findProcess(pid);
            if (as != null && !as.exited()) {
                as.munmap(r.va, r.length);
            }
        }
    }

    private void processExited(int pid) {
        List<Long> vas;
        synchronized (this) {
            files.remove(pid);
            TreeMap<Long, Region> m = byProcess.get(pid);
            vas = m == null ? List.of() : new ArrayList<>(m.keySet());
        }
        for (long va : vas) {
            try {
                munmap(pid, va);
            } catch (KernelException gone) {
                // unmapped meanwhile
            }
        }
    }

    // ------------------------------------------------------------------ peer-to-peer

    /**
     * Pins the pages of [va, va+length) (page-rounded) for a peer; {@code invalidate} runs when the
     * range is unmapped or the controller goes while pinned. EINVAL when the range is not wholly in
     * one mapping of this PMR.
     */
    public synchronized Pin pin(int pid, long va, long length, Runnable invalidate) {
        long start = va & -PAGE;
        long end = (va + length + PAGE - 1) & -PAGE;
        Region r = containing(pid, start, end - start);
        if (r == null) {
            throw new KernelException(Errno.EINVAL, String.format("%s: 0x%x+0x%x of pid %d is not inside one PMR mapping", name(), va, length, pid));
        }
        if (invalidate == null) {
            throw new KernelException(Errno.EINVAL, name() + ": a pin needs an invalidation callback");
        }
        Pin p = new Pin(r, r.offset + (start - r.va), end - start, invalidate);
        r.pins.add(p);
        pins++;
        return p;
    }

    /** Maps a pin into the peer's IOMMU domain: one contiguous bus-address range onto the PMR BAR. */
    public synchronized Mapping dmaMap(Pin p, DmaMapper peer) {
        if (p.put || p.region.freed) {
            throw new KernelException(Errno.EINVAL, String.format("%s: the pin of PMR 0x%x+0x%x is no longer held", name(), p.offset, p.length));
        }
        Mapping m = new Mapping(p, peer, peer.dmaMapResource(fn.resource(bar), p.offset, p.length, DmaDirection.BIDIRECTIONAL));
        p.mappings.add(m);
        return m;
    }

    /** Undoes {@link #dmaMap}; a mapping torn down already (the range was unmapped) returns quietly. */
    public synchronized void dmaUnmap(Mapping m) {
        if (!m.unmapped) {
            m.peer.dmaUnmap(m.iova, (int) (m.pin.length / PAGE));
            m.unmapped = true;
            m.pin.mappings.remove(m);
        }
    }

    /** Drops a pin (and any mapping its holder left); a pin torn down already returns quietly. */
    public synchronized void unpin(Pin p) {
        unpinLocked(p);
        p.region.pins.remove(p);
    }

    private void unpinLocked(Pin p) {
        assert Thread.holdsLock(this);
        for (Mapping m : List.copyOf(p.mappings)) {
            dmaUnmap(m);
        }
        p.put = true;
    }

    // ------------------------------------------------------------------ dma-buf export

    /** Exported dma-bufs not yet released. */
    private final List<PmrDmaBuf> exports = new ArrayList<>();
    /** The controller is going: no new export. */
    private volatile boolean shuttingDown;

    /**
     * Exports [va, va+length) of a PMR mapping of {@code proc} as a dma-buf open in the process
     * (page-aligned). The PMR range stays reserved while the buffer lives, even if the process
     * unmaps it; importers map it peer to peer through BAR2; the controller going revokes it.
     *
     * @throws KernelException EINVAL for an unaligned range or one outside a PMR mapping
     */
    public int exportDmabuf(AddressSpace proc, long va, long length) {
        PmrDmaBuf d;
        synchronized (this) {
            if (shuttingDown) {
                throw new KernelException(Errno.ENODEV, name() + ": the controller is going away");
            }
            Region r = (va & (PAGE - 1)) != 0 || (length & (PAGE - 1)) != 0 ? null : containing(proc.pid(), va, length);
            if (r == null) {
                throw new KernelException(Errno.EINVAL, String.format("%s: 0x%x+0x%x of pid %d is not a page-aligned range of one PMR mapping",
                        name(), va, length, proc.pid()));
            }
            r.exports++;
            d = new PmrDmaBuf(this, r, r.offset + (va - r.va), length);
            d.buf = org.peerdirect.kernel.dmabuf.DmaBuf.export(name() + " pmr", length, d); // takes no lock
            exports.add(d); // with its buffer: a shutdown sees it whole or not at all
        }
        // a descriptor that cannot be installed drops the only reference: the buffer is released then, once
        return d.buf.fd(proc);
    }

    /** A buffer's last reference went (PmrDmaBuf.release): the range it kept reserved is free again if unmapped. */
    synchronized void released(PmrDmaBuf d) {
        exports.remove(d);
        Region region = d.region;
        if (--region.exports == 0 && region.freed) {
            regions.remove(region.offset, region); // the range is free for new mappings now
        }
    }

    PciFunction function() {
        return fn;
    }

    int bar() {
        return bar;
    }

    /** The controller goes: every exported buffer revoked; returns what pinned, non-revocable importers keep. */
    private List<String> revokeExports() {
        List<PmrDmaBuf> all;
        synchronized (this) {
            shuttingDown = true; // no export from now on
            all = new ArrayList<>(exports);
        }
        List<String> stuck = new ArrayList<>();
        for (PmrDmaBuf d : all) {
            d.buf.lockResv();
            try {
                for (var a : d.buf.revoke()) {
                    stuck.add(name() + ": " + a.importerName() + " keeps a pinned, non-revocable mapping of " + d.buf);
                }
            } catch (RuntimeException e) { // an importer failed: the others and the rest of the shutdown go on
                stuck.add(name() + ": revoking " + d.buf + " failed: " + e);
            } finally {
                d.buf.unlockResv();
            }
        }
        return stuck;
    }

    // ------------------------------------------------------------------ persistence, MMIO

    /**
     * The PMR's write barrier: a read of {@code PMRSTS}, which completes once every write posted
     * to the region before it is persistent ({@code PMRCAP.PMRWBM} bit 1).
     *
     * @throws KernelException EIO when the controller reports a PMR error, ENODEV when it is gone
     */
    public void flush() {
        synchronized (this) {
            barriers++;
        }
        pmr.barrier();
    }

    /** Reads PMR bytes through the BAR (MMIO, 32 bits at a time), as the kernel's {@code memcpy_fromio}. */
    public byte[] read(long offset, int length) {
        byte[] out = pmr.read(offset, length);
        synchronized (this) {
            mmioBytes += length;
        }
        return out;
    }

    /** Writes PMR bytes through the BAR (MMIO; partial words read-modify-write), as {@code memcpy_toio}. Posted, not yet persistent. */
    public void write(long offset, byte[] data) {
        pmr.write(offset, data);
        synchronized (this) {
            mmioBytes += data.length;
        }
    }

    // ------------------------------------------------------------------ admin passthrough, reset

    /** An admin command's completion: status ({@code NVME_SC_*} with its type, {@code 0} success) and DW0. */
    public record AdminCompletion(int status, int result) {
    }

    /**
     * {@code NVME_IOCTL_ADMIN_CMD} ({@code nvme_user_cmd}) without the buffer mapping: the 64-byte
     * command as given (the driver sets only the command id), data pointers included, submitted
     * on the admin queue and awaited. A controller that fails under it is reset and the command
     * tried once more; a command the controller refuses comes back with its status.
     *
     * @throws KernelException EINVAL for a command that is not 64 bytes or an Asynchronous Event
     *         Request (the driver keeps one outstanding itself), ENODEV when the controller
     *         is gone, EIO when it fails again after a reset
     */
    public AdminCompletion adminCommand(MemorySegment command) {
        if (command.byteSize() != org.peerdirect.ssd.regs.NvmeCommand.SQE_SIZE) {
            throw new KernelException(Errno.EINVAL, name() + ": an admin command is 64 bytes, not " + command.byteSize());
        }
        if ((command.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) & 0xff) == org.peerdirect.ssd.regs.NvmeCommand.nvme_admin_async_event) {
            throw new KernelException(Errno.EINVAL, name() + ": Asynchronous Event Requests are the driver's own (they complete only on an event)");
        }
        NvmeDev.AdminResult r = dev.submitSync(c -> c.copyFrom(command));
        return new AdminCompletion(r.status(), r.result());
    }

    /**
     * {@code nvme_reset_ctrl} ({@code echo 1 > /sys/class/nvme/nvme0/reset_controller}): the
     * controller disabled and brought up again on the admin queue, the PMR enabled again if it
     * was turned off. Mappings and pins stay (the PMR's bytes do not move).
     */
    public void reset() {
        dev.reset();
    }

    // ------------------------------------------------------------------ teardown, view

    /**
     * The controller goes (driver unbind): every mapping is unmapped (pins invalidated first), the
     * PMR disabled and the controller shut down normally ({@code CC.SHN}, {@link NvmeDev#shutdown}),
     * which makes what was posted persistent, and its admin queue freed. Returns what could not be
     * cleaned.
     */
    public List<String> shutdown() {
        List<String> stuck = revokeExports(); // importers let go first
        Map<Integer, DeviceFile> open;
        synchronized (this) {
            open = new HashMap<>(files);
        }
        for (Map.Entry<Integer, DeviceFile> e : open.entrySet()) {
            processExited(e.getKey()); // outside the lock: invalidations run
            AddressSpace as = mm.findProcess(e.getKey());
            if (as != null) {
                as.closeFile(e.getValue());
            }
        }
        List<String> left = new ArrayList<>(stuck);
        synchronized (this) {
            // ranges kept only by revoked dma-bufs still open are not leaks: their descriptors hold them
            long mapped = regions.values().stream().filter(r -> !r.freed).count();
            if (mapped > 0) {
                left.add(name() + ": " + mapped + " PMR mappings left at shutdown");
            }
        }
        pmr.disable(); // the PMR off (its barrier runs), then the controller's normal shutdown
        left.addAll(dev.shutdown());
        return left;
    }

    /**
     * What {@code ssd:info} shows: Identify Controller's model, serial, firmware and version, the
     * PMR's use, the controller's resets and asynchronous events (DW0s, oldest first), and the DMA
     * pages the driver holds mapped for it (the admin queue's two).
     */
    public record Info(String name, String bdf, String model, String serial, String firmware, String version, int bar, long pmrBytes,
            long mappedBytes, int mappings, int pinned, long pins, long invalidations, long barriers, long mmioBytes, List<String> ranges,
            long resets, long asyncEvents, List<Integer> recentEvents, int dmaPages) {
    }

    public synchronized Info info() {
        long mapped = 0;
        int pinned = 0;
        List<String> ranges = new ArrayList<>();
        for (Region r : regions.values()) {
            mapped += r.length;
            long live = r.pins.stream().filter(p -> !p.put).count();
            pinned += (int) live;
            ranges.add(String.format("PMR 0x%08x-0x%08x pid %d at 0x%x%s", r.offset, r.offset + r.length, r.pid, r.va,
                    live == 0 ? "" : ", pinned by " + live + " peer registration(s)"));
        }
        NvmeDev.Identity id = dev.identity();
        NvmeDev.Stats st = dev.stats();
        return new Info(name(), fn.bdf(), id.model(), id.serial(), id.firmware(), id.versionText(), bar, pmrBytes, mapped, regions.size(), pinned,
                pins, invalidations, barriers, mmioBytes, ranges, st.resets(), st.aens(), st.events(), st.dmaPages());
    }
}
