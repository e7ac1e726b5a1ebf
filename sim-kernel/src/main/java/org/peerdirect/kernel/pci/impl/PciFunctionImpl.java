package org.peerdirect.kernel.pci.impl;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import org.peerdirect.kernel.pci.BarAperture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.BarWriteHandler;
import org.peerdirect.kernel.pci.IrqHandler;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One function: BAR memory, MMIO, its MSI-X vectors ({@link MsixVectors}), DMA through its IOMMU
 * domain, and removal.
 *
 * <h2>Invariants and lock rules</h2>
 * <ul>
 * <li><b>BAR memory lifetime.</b> {@code state} packs a {@code REMOVED} bit and the number of
 * accesses in flight. An MMIO access {@link #enter()}s (increments the count unless {@code REMOVED}
 * is set; if it is, the access is a removed-device access: reads return all ones, writes are
 * dropped) and {@link #exit()}s. {@link #remove()} sets {@code REMOVED} and takes one use itself in
 * the same atomic update. Once {@code REMOVED} is set the count only goes down, so exactly one
 * {@code exit()} brings the state to {@code REMOVED} with count 0, and that one closes the arena:
 * no MMIO access can ever touch freed memory (no {@code IllegalStateException} from a closed arena,
 * no crash), and {@code remove()} never waits for a driver. A {@link BarWriteHandler} runs inside
 * the writer's use, so the device model may touch {@link #barMemory} from it, and may even call
 * {@code remove()} from it.</li>
 * <li><b>Vectors</b> are {@link MsixVectors}' (its comment gives their rules). {@code remove()}
 * makes {@link #present()} false before it sweeps them, and a vector checks {@code present()}
 * under its monitor before it starts a thread or counts a raise, so nothing is started or
 * signalled after the sweep.</li>
 * <li><b>Removal listeners</b> are guarded by {@code listenersLock} and run outside it, exactly
 * once.</li>
 * </ul>
 */
final class PciFunctionImpl implements PciFunction {

    private static final long REMOVED = 1L << 62;
    private static final VarHandle LE32 = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN).varHandle();
    private static final VarHandle LE64 = ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN).varHandle();
    private static final VarHandle BE32 = ValueLayout.JAVA_INT.withOrder(ByteOrder.BIG_ENDIAN).varHandle();
    /** How long a wait for a handler or a concurrent removal goes before it is reported (it goes on waiting). */
    private static final long REPORT_EVERY_MS = 5_000;

    private final PciBusCore bus;
    private final long number;
    private final String bdf;
    private final PciDeviceSpec spec;
    private final Consumer<String> warn;
    /** Owns all BAR memory of the function; closed exactly once, by the last user (see class comment). */
    private final Arena arena;
    /** Per BAR index: memory (null: not implemented), write handler (may be null). */
    private final MemorySegment[] bars = new MemorySegment[PciDeviceSpec.MAX_BARS];
    private final BarWriteHandler[] onWrite = new BarWriteHandler[PciDeviceSpec.MAX_BARS];
    private final org.peerdirect.kernel.pci.BarReadHandler[] onRead = new org.peerdirect.kernel.pci.BarReadHandler[PciDeviceSpec.MAX_BARS];
    /** Per BAR index: the model's window resolver for an aperture BAR (which has no memory), else null. */
    private final BarAperture[] apertures = new BarAperture[PciDeviceSpec.MAX_BARS];
    private final long[] barSizes = new long[PciDeviceSpec.MAX_BARS];
    private final MsixVectors msix;
    /** REMOVED bit | accesses in flight. */
    private final AtomicLong state = new AtomicLong();
    /** Counted down when remove() has done everything but (possibly) freeing the BAR memory. */
    private final CountDownLatch removed = new CountDownLatch(1);
    private volatile Thread remover;
    private final Object listenersLock = new Object();
    /** Guarded by listenersLock; null once remove() has taken them to run. */
    private List<Runnable> listeners = new ArrayList<>();

    /** The IOMMU domain the bus attached at plug-in, or null on a bus without IOMMU; destroyed by the bus at removal. */
    final IommuDomain domain;

    PciFunctionImpl(PciBusCore bus, long number, String bdf, PciDeviceSpec spec, Consumer<String> warn, IommuDomain domain) {
        this.bus = bus;
        this.domain = domain;
        this.number = number;
        this.bdf = bdf;
        this.spec = spec;
        this.warn = warn;
        this.arena = Arena.ofShared();
        try {
            for (PciDeviceSpec.Bar b : spec.bars()) {
                barSizes[b.index()] = b.size();
                onWrite[b.index()] = b.onWrite();
                onRead[b.index()] = b.onRead();
                if (b.aperture() != null) {
                    apertures[b.index()] = b.aperture();
                    continue; // a window onto the device's memory: nothing to allocate
                }
                // page aligned like a real BAR; allocate() zero-fills
                bars[b.index()] = arena.allocate(b.size(), 4096);
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            arena.close();
            throw e;
        }
        msix = new MsixVectors(bdf, spec.msixVectors(), this::present, warn);
    }

    long number() {
        return number;
    }

    @Override
    public String bdf() {
        return bdf;
    }

    @Override
    public int vendorId() {
        return spec.vendorId();
    }

    @Override
    public int deviceId() {
        return spec.deviceId();
    }

    @Override
    public int classCode() {
        return spec.classCode();
    }

    @Override
    public String name() {
        return spec.name();
    }

    @Override
    public long barSize(int bar) {
        checkBarIndex(bar);
        return barSizes[bar];
    }

    @Override
    public BarAperture barAperture(int bar) {
        checkBarIndex(bar);
        return apertures[bar];
    }

    @Override
    public int msixVectors() {
        return msix.count();
    }

    @Override
    public boolean present() {
        return (state.get() & REMOVED) == 0;
    }

    @Override
    public String toString() {
        return String.format("%s [%04x:%04x] %s%s", bdf, vendorId(), deviceId(), name(), present() ? "" : " (removed)");
    }

    // ---------------------------------------------------------------- MMIO

    private static void checkBarIndex(int bar) {
        if (bar < 0 || bar >= PciDeviceSpec.MAX_BARS) {
            throw new IllegalArgumentException("bar " + bar + ": BAR index must be 0..5");
        }
    }

    private MemorySegment bar(int bar) {
        checkBarIndex(bar);
        MemorySegment s = bars[bar];
        if (s == null) {
            throw new IllegalArgumentException("bar " + bar + ": " + (apertures[bar] != null
                    ? "an aperture onto the device's memory of " + bdf + ", without memory of its own (barAperture)"
                    : "not implemented by " + bdf + " (size 0)"));
        }
        return s;
    }

    /**
     * Checks that a {@code width}-byte access at {@code offset} is aligned and inside the BAR; its
     * memory, or for an aperture BAR null (the access resolves its page, see {@link #target}).
     */
    private MemorySegment checkAccess(int bar, long offset, int width) {
        checkBarIndex(bar);
        long size = barSizes[bar];
        if (size == 0) {
            throw new IllegalArgumentException("bar " + bar + ": not implemented by " + bdf + " (size 0)");
        }
        MemorySegment s = bars[bar];
        if (offset < 0 || offset > size - width) {
            throw new IllegalArgumentException(String.format(
                    "bar %d offset 0x%x: a %d-byte access is outside the BAR (size 0x%x) of %s", bar, offset, width, size, bdf));
        }
        if ((offset & (width - 1)) != 0) {
            throw new IllegalArgumentException(String.format(
                    "bar %d offset 0x%x: not aligned to the %d-byte access (BAR size 0x%x) of %s", bar, offset, width, size, bdf));
        }
        return s;
    }

    /** Takes a use of the BAR memory; false once the function is removed (the access is then a no-op). */
    private boolean enter() {
        for (;;) {
            long s = state.get();
            if ((s & REMOVED) != 0) {
                return false;
            }
            if (state.compareAndSet(s, s + 1)) {
                return true;
            }
        }
    }

    /** Drops a use; the last one out after removal frees the memory. */
    private void exit() {
        if (state.decrementAndGet() == REMOVED) {
            freeBars();
        }
    }

    private void freeBars() {
        try {
            arena.close();
        } catch (IllegalStateException e) {
            // only if a device model kept the arena acquired (e.g. handed a BAR slice to a native call)
            warn.accept("pci " + bdf + ": cannot free BAR memory: " + e.getMessage());
        }
    }

    /**
     * Where an access lands: the BAR's own memory, or for an aperture BAR the page the device maps
     * there now (null: nothing mapped, or the device's memory is already freed).
     */
    private MemorySegment target(int bar, MemorySegment own, long offset) {
        if (own != null) {
            return own;
        }
        MemorySegment page = apertures[bar].page(offset & -4096L);
        return page == null || !page.scope().isAlive() ? null : page;
    }

    /** The offset of an access inside what {@link #target} returned. */
    private static long at(MemorySegment own, long offset) {
        return own != null ? offset : offset & 4095;
    }

    @Override
    public int read32(int bar, long offset) {
        return (int) read(bar, offset, 4, LE32);
    }

    @Override
    public long read64(int bar, long offset) {
        return read(bar, offset, 8, LE64);
    }

    @Override
    public int read32be(int bar, long offset) {
        return (int) read(bar, offset, 4, BE32);
    }

    /** An MMIO read; all ones when the device is gone or (aperture) nothing is mapped at the page. */
    private long read(int bar, long offset, int width, VarHandle vh) {
        MemorySegment s = checkAccess(bar, offset, width);
        if (!enter()) {
            return -1L;
        }
        try {
            org.peerdirect.kernel.pci.BarReadHandler h = onRead[bar];
            if (h != null) {
                try {
                    h.reading(bar, offset, width);
                } catch (RuntimeException e) {
                    warn.accept(String.format("pci %s: BAR read handler failed on bar %d offset 0x%x: %s", bdf, bar, offset, e));
                }
            }
            MemorySegment t = target(bar, s, offset);
            if (t == null) {
                return -1L;
            }
            return width == 4 ? (int) vh.getVolatile(t, at(s, offset)) : (long) vh.getVolatile(t, at(s, offset));
        } catch (IllegalStateException freedMeanwhile) {
            return -1L; // the device freed the page under the read: an unclaimed request
        } finally {
            exit();
        }
    }

    @Override
    public void write32(int bar, long offset, int value) {
        write(bar, offset, 4, value, LE32);
    }

    @Override
    public void write32be(int bar, long offset, int value) {
        write(bar, offset, 4, value, BE32);
    }

    @Override
    public void write64(int bar, long offset, long value) {
        write(bar, offset, 8, value, LE64);
    }

    private void write(int bar, long offset, int width, long value, VarHandle vh) {
        post(bar, offset, checkAccess(bar, offset, width), width, value, vh, null, 0);
    }

    @Override
    public void iowrite64Copy(int bar, long offset, MemorySegment src, long srcOffset, int len) {
        if (len < 8 || len > 4096 || (len & 7) != 0) {
            throw new IllegalArgumentException(String.format("bar %d offset 0x%x: a write-combined burst of %d bytes (whole 64-bit words, 8..4096) to %s",
                    bar, offset, len, bdf));
        }
        MemorySegment s = checkAccess(bar, offset, 8);
        if ((offset & 4095) + len > 4096 || offset > barSizes[bar] - len) {
            throw new IllegalArgumentException(String.format("bar %d offset 0x%x: a write-combined burst of %d bytes crosses a 4 KiB page or leaves the BAR (size 0x%x) of %s",
                    bar, offset, len, barSizes[bar], bdf));
        }
        post(bar, offset, s, len, 0, null, src, srcOffset);
    }

    /**
     * A posted write, already checked: lands the bytes (a volatile store of {@code value} with
     * {@code vh}, or, when {@code src} is not null, the burst of {@code width} bytes from it), then
     * tells the device's handler. Dropped once the device is gone or when it hits an aperture page
     * the device has not mapped; a handler's failure is logged, never thrown at the driver.
     */
    private void post(int bar, long offset, MemorySegment s, int width, long value, VarHandle vh, MemorySegment src, long srcOffset) {
        if (!enter()) {
            return; // the device is gone: the write goes nowhere, as on PCIe
        }
        try {
            MemorySegment t = target(bar, s, offset);
            try {
                if (t == null) {
                    return; // an aperture page the device has not mapped: the write goes nowhere
                }
                if (src != null) {
                    MemorySegment.copy(src, srcOffset, t, at(s, offset), width);
                    VarHandle.releaseFence(); // the burst is visible before the device hears of it, as a volatile store is
                } else if (width == 4) {
                    vh.setVolatile(t, at(s, offset), (int) value);
                } else {
                    vh.setVolatile(t, at(s, offset), value);
                }
            } catch (IllegalStateException freedMeanwhile) {
                return;
            }
            BarWriteHandler h = onWrite[bar];
            if (h != null) {
                try {
                    if (src != null) {
                        h.writtenBurst(bar, offset, src, srcOffset, width);
                    } else {
                        h.written(bar, offset, width, width == 4 ? value & 0xffff_ffffL : value);
                    }
                } catch (RuntimeException e) {
                    // a posted write: the driver never hears about what the device made of it
                    warn.accept(String.format("pci %s: BAR write handler failed on a %d-byte write to bar %d offset 0x%x: %s", bdf, width, bar, offset, e));
                }
            }
        } finally {
            exit();
        }
    }

    @Override
    public MemorySegment ioremap(int bar, long offset, long length) {
        checkBarIndex(bar);
        BarAperture a = apertures[bar];
        long size = a != null ? barSizes[bar] : bar(bar).byteSize();
        if ((offset & 4095) != 0 || (length & 4095) != 0 || length <= 0) {
            throw new IllegalArgumentException(String.format("ioremap of %s bar %d: offset 0x%x and length 0x%x must be whole 4 KiB pages",
                    bdf, bar, offset, length));
        }
        if (offset < 0 || offset + length > size) {
            throw new IllegalArgumentException(String.format("ioremap of %s bar %d: [0x%x, 0x%x) leaves the BAR of 0x%x bytes",
                    bdf, bar, offset, offset + length, size));
        }
        if (a == null) {
            return bars[bar].asSlice(offset, length);
        }
        // an aperture: mappable only where the device keeps the range behind one window that does not move (an NVMe PMR)
        MemorySegment m = present() ? a.page(offset) : null;
        if (m == null || !m.scope().isAlive() || m.byteSize() < length) {
            throw new IllegalArgumentException(String.format("ioremap of %s bar %d: [0x%x, 0x%x) of the aperture is not one window the device keeps "
                    + "mapped (%s)", bdf, bar, offset, offset + length, m == null ? "nothing mapped at its first page"
                            : "its pages move: map them page by page through the device"));
        }
        return m.asSlice(0, length);
    }

    @Override
    public MemorySegment barMemory(int bar) {
        return bar(bar);
    }

    // ---------------------------------------------------------------- MSI-X (MsixVectors)

    @Override
    public void requestIrq(int vector, IrqHandler handler) {
        msix.requestIrq(vector, handler);
    }

    @Override
    public void freeIrq(int vector) {
        msix.freeIrq(vector);
    }

    @Override
    public boolean irqRequested(int vector) {
        return msix.irqRequested(vector);
    }

    @Override
    public long msixRaised(int vector) {
        return msix.raised(vector);
    }

    @Override
    public long msixDelivered(int vector) {
        return msix.delivered(vector);
    }

    @Override
    public boolean msixPending(int vector) {
        return msix.pending(vector);
    }

    @Override
    public void raiseMsix(int vector) {
        msix.raise(vector);
    }

    // ---------------------------------------------------------------- DMA

    @Override
    public DmaMapper dma() {
        return domainOrNoIommu();
    }

    @Override
    public DmaPort dmaPort() {
        return domainOrNoIommu();
    }

    private IommuDomain domainOrNoIommu() {
        if (domain == null) {
            throw new KernelException(Errno.ENODEV, "pci " + bdf + ": the bus has no IOMMU, so the function cannot do DMA");
        }
        return domain;
    }

    // ---------------------------------------------------------------- removal

    @Override
    public void addRemovalListener(Runnable listener) {
        Objects.requireNonNull(listener, "listener");
        synchronized (listenersLock) {
            if (listeners != null) {
                listeners.add(listener);
                return;
            }
        }
        runListener(listener); // already removed: tell the latecomer now
    }

    @Override
    public void removeRemovalListener(Runnable listener) {
        synchronized (listenersLock) {
            if (listeners != null) {
                listeners.remove(listener);
            }
        }
    }

    private void runListener(Runnable r) {
        try {
            r.run();
        } catch (RuntimeException e) {
            warn.accept("pci " + bdf + ": removal listener failed: " + e);
        }
    }

    @Override
    public void remove() {
        long prev = state.getAndUpdate(s -> (s & REMOVED) != 0 ? s : (s + 1) | REMOVED);
        if ((prev & REMOVED) != 0) {
            awaitRemoval();
            return;
        }
        remover = Thread.currentThread();
        try {
            bus.unlink(this);
            List<Runnable> toRun;
            synchronized (listenersLock) {
                toRun = listeners;
                listeners = null;
            }
            toRun.forEach(this::runListener);
            bus.unpublish(this); // drivers bound to the service are deactivated here, on this thread
            msix.sweep(); // present() is false already: no vector can be requested or raised any more
            bus.detachDomain(this); // after the driver's unbind: its unmaps are done, what is left leaked
        } finally {
            removed.countDown();
            exit(); // the remover's use: BAR memory is freed now, or by the last MMIO access in flight
        }
    }

    /**
     * A second remove() returns once the first has finished, so a caller (the bus shutting down)
     * can rely on the function's threads being gone — except on the removing thread itself (a
     * listener or a driver's deactivate calling back) or this function's own handler threads, which
     * the first removal may be waiting for.
     */
    private void awaitRemoval() {
        Thread me = Thread.currentThread();
        if (me == remover || msix.isHandlerThread(me)) {
            return;
        }
        boolean interrupted = false;
        try {
            while (removed.getCount() > 0) {
                try {
                    if (!removed.await(REPORT_EVERY_MS, TimeUnit.MILLISECONDS)) {
                        warn.accept("pci " + bdf + ": still waiting for the concurrent removal to finish");
                    }
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                me.interrupt();
            }
        }
    }
}
