package org.peerdirect.kernel.pci;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.dma.DmaPort;

import org.osgi.annotation.versioning.ProviderType;

/**
 * One PCI function on the {@link PciBus}: the handle the device model got from
 * {@link PciBus#register} and the service a driver binds to, the {@code struct pci_dev} of both.
 * A driver component selects its devices with the service properties:
 *
 * <pre>{@code
 * @Activate
 * public Mlx5Driver(@Reference(target = "(&(pci.vendor=5555)(pci.device=4115))") PciFunction pdev) { ... }
 * }</pre>
 *
 * <h2>Driver side</h2> BAR MMIO ({@link #read32}, {@link #write32}, ... like {@code readl}/{@code writel}
 * and {@code ioread32be}/{@code iowrite32be}), MSI-X interrupts ({@link #requestIrq}, {@link #freeIrq})
 * and {@link #addRemovalListener}. Offsets are byte offsets into the BAR, aligned to the access
 * width; a bad BAR, offset or vector is a driver bug and throws {@link IllegalArgumentException}
 * whether or not the device is present.
 *
 * <p><b>Surprise removal.</b> Once the function is removed ({@link #present()} false) every read
 * returns all ones ({@code 0xffffffff}, {@code -1L}), exactly what a PCIe read of a vanished device
 * returns, and writes are dropped: MMIO never throws and never blocks because of removal, so a
 * driver detects it the real way ({@code pci_channel_offline}, a register reading
 * {@code 0xffffffff}).
 *
 * <h2>Device side</h2> {@link #barMemory} (the model's own view of its BARs), {@link #raiseMsix} and
 * {@link #remove}.
 */
@ProviderType
public interface PciFunction {

    /** Service property: vendor id ({@link Integer}). */
    String PCI_VENDOR = "pci.vendor";
    /** Service property: device id ({@link Integer}). */
    String PCI_DEVICE = "pci.device";
    /** Service property: bus address {@code 0000:03:00.0} ({@link String}). */
    String PCI_BDF = "pci.bdf";
    /** Service property: 24-bit class code ({@link Integer}). */
    String PCI_CLASS = "pci.class";

    /** Bus address, {@code domain:bus:device.function} in hex as {@code pci_name()} prints it: {@code 0000:03:00.0}. */
    String bdf();

    int vendorId();

    int deviceId();

    /** 24-bit class code, e.g. {@code 0x020700} (network controller, InfiniBand). */
    int classCode();

    /** The device model's name for the device. */
    String name();

    /**
     * Size in bytes of BAR {@code bar} (0..5), 0 when the function does not implement it.
     *
     * @see "pci_resource_len() in include/linux/pci.h"
     */
    long barSize(int bar);

    /** MSI-X table size: vectors 0 .. msixVectors()-1 exist. */
    int msixVectors();

    /** False once the function was removed (surprise hot-unplug); never true again. */
    boolean present();

    // ---- driver side: MMIO ----

    /**
     * 32-bit little-endian read; all ones after removal.
     *
     * @see "readl()"
     */
    int read32(int bar, long offset);

    /**
     * 32-bit little-endian write; dropped after removal.
     *
     * @see "writel()"
     */
    void write32(int bar, long offset, int value);

    /**
     * 64-bit little-endian read; {@code -1L} after removal.
     *
     * @see "readq()"
     */
    long read64(int bar, long offset);

    /**
     * 64-bit little-endian write; dropped after removal.
     *
     * @see "writeq()"
     */
    void write64(int bar, long offset, long value);

    /**
     * A write-combined burst: {@code length} bytes of {@code src} from {@code srcOffset} (whole
     * 64-bit words, 8 to 4096 bytes, inside one 4 KiB page of the BAR, 8-byte aligned) stored at
     * {@code offset} as one posted write, the way
     * a CPU's write-combining buffer flushes a BlueFlame WQE ({@code mlx5_bf_copy} then
     * {@code mmio_flush_writes}) into a single PCIe TLP. The device's handler sees it as one write
     * ({@link BarWriteHandler#writtenBurst}); dropped after removal.
     *
     * @throws IllegalArgumentException for a length that is not whole words, a burst crossing a
     *         page or leaving the BAR, or an unaligned offset (the message names which)
     * @see "__iowrite64_copy() in lib/iomap_copy.c"
     */
    void iowrite64Copy(int bar, long offset, java.lang.foreign.MemorySegment src, long srcOffset, int length);

    /**
     * 32-bit big-endian read (the mlx5 initialization segment is big-endian); all ones after removal.
     *
     * @see "ioread32be()"
     */
    int read32be(int bar, long offset);

    /**
     * 32-bit big-endian write; dropped after removal.
     *
     * @see "iowrite32be()"
     */
    void write32be(int bar, long offset, int value);

    /**
     * The CPU's mapping of memory BAR {@code bar} at [offset, offset+length): what a driver hands
     * to {@code io_remap_pfn_range} to map device memory behind a BAR (an NVMe PMR, a GPU's
     * CPU-visible memory BAR) into a process. Loads and stores through it reach the BAR's memory
     * as MMIO does, without the device's write handler seeing them (a prefetchable BAR the device
     * does not watch). Valid until the function is removed; then accessing it throws
     * {@link IllegalStateException}.
     *
     * <p>An aperture BAR ({@link BarAperture}) maps only where the device keeps the whole range
     * behind one contiguous window of its memory ({@link BarAperture#page} of the first page
     * covers it: an NVMe PMR, which never moves); the mapping is then the device's memory and
     * lives as long as the device keeps it. A GPU's BAR1, whose pages come and go, is refused.
     *
     * @throws IllegalArgumentException when the function has no such BAR, the BAR is an aperture
     *         that does not keep the range behind one window (nothing mapped, or its pages move:
     *         map them page by page through the device), or the range is not page-aligned or
     *         leaves the BAR (the message names which)
     * @see "io_remap_pfn_range(), pci_resource_start()"
     * @since 0.11
     */
    MemorySegment ioremap(int bar, long offset, long length);

    /**
     * BAR {@code bar} as a DMA resource for another device's {@code dma_map_resource} (a GPU's
     * BAR1 for an HCA's peer-to-peer DMA): {@code pci_resource_start(pdev, bar)}. Checked when
     * mapped, not here.
     *
     * @see "pci_resource_start(), dma_map_resource()"
     * @since 0.12
     */
    default org.peerdirect.kernel.dma.DmaResource resource(int bar) {
        return new PciBarResource(this, bar);
    }

    // ---- driver side: DMA ----
    /**
     * The DMA mapping calls for this function ({@code dma_map_sg(&pdev->dev, ...)}): the IOMMU
     * domain the bus attached when the function was plugged in, named by its bus address. The
     * driver maps and unmaps here; the device's accesses go through the same domain
     * ({@link #dmaPort}).
     *
     * @throws org.peerdirect.kernel.mm.KernelException ENODEV when the bus has no IOMMU
     * @see "iommu_probe_device(), dma_map_sg_attrs()"
     */
    DmaMapper dma();

    // ---- driver side: interrupts ----

    /**
     * Installs {@code handler} for MSI-X {@code vector}, which gets its own handler thread
     * {@code irq/<vector>-<bdf>} (like a threaded IRQ's {@code irq/<n>-<name>} kthread), so vectors
     * are handled concurrently and a handler never runs on the thread that raised the interrupt.
     * If the vector's pending bit is set (raised while no handler was installed), the interrupt is
     * delivered once right away. After removal this does nothing: the device can no longer
     * interrupt.
     *
     * @throws IllegalArgumentException when the vector does not exist (the message names the vector
     *         and the function's vector count)
     * @throws IllegalStateException when the vector already has a handler
     * @see "request_irq() in kernel/irq/manage.c, pci_irq_vector()"
     */
    void requestIrq(int vector, IrqHandler handler);

    /**
     * Removes the vector's handler and ends its thread. Returns only after a handler running on the
     * vector has returned (except when called from that handler itself, which cannot wait for
     * itself); afterwards the handler is never called again. Freeing a free vector does nothing, so
     * a driver's teardown works after surprise removal too. As with {@code free_irq}, do not call
     * it from a handler that the handler being freed is waiting for.
     *
     * @see "free_irq(), synchronize_irq() in kernel/irq/manage.c"
     */
    void freeIrq(int vector);

    /** True while a handler is requested on the vector. */
    boolean irqRequested(int vector);

    /** Interrupts the device raised on the vector (not counting raises after removal). */
    long msixRaised(int vector);

    /** Times the vector's handler was called. */
    long msixDelivered(int vector);

    /** The vector's bit in the MSI-X pending bit array: raised while no handler was requested. */
    boolean msixPending(int vector);

    /**
     * Runs {@code listener} once when the function is removed, on the thread calling
     * {@link #remove()}, before the function's service is unregistered (so before a driver bound to
     * it is deactivated). Added after removal it runs at once on the caller's thread.
     */
    void addRemovalListener(Runnable listener);

    /** Forgets a removal listener (a driver unbinding from a device that stays). */
    void removeRemovalListener(Runnable listener);

    // ---- device side ----
    /**
     * The device's DMA: memory reads, writes and atomics at bus addresses, translated and checked
     * by the function's IOMMU domain (the one {@link #dma} maps into). All a device model sees of
     * host memory. After removal the domain is gone and every access faults.
     *
     * @throws org.peerdirect.kernel.mm.KernelException ENODEV when the bus has no IOMMU
     */
    DmaPort dmaPort();


    /**
     * The device model's view of BAR {@code bar}: off-heap memory the bus allocated, in which driver
     * writes land (in the byte order of the access) and from which driver reads are served. Valid
     * until the function is removed and the last in-flight MMIO access has finished; the memory is
     * then freed and accessing the segment throws {@link IllegalStateException}, so a model stops its
     * own threads before (or handles that exception when) it removes the function.
     *
     * @throws IllegalArgumentException when the function has no such BAR, or the BAR is an aperture
     *         ({@link #barAperture})
     */
    MemorySegment barMemory(int bar);

    /**
     * The window resolver of an aperture BAR ({@link BarAperture}: a GPU's BAR1 onto its video
     * memory), or null for a BAR with memory of its own or no BAR. How another device's IOMMU
     * mapping of the BAR ({@code dma_map_resource}) reaches the memory behind it.
     *
     * @since 0.5
     */
    BarAperture barAperture(int bar);

    /**
     * Sends MSI-X message {@code vector}. With a handler requested, the vector's handler thread runs
     * it; raises that arrive before the thread picked up the previous one coalesce into one call
     * (a raise while the handler runs causes one more call after it), so a handler drains all the
     * work it finds, as {@code mlx5_eq_comp_int} polls its EQ to the end. Without a handler the
     * vector's pending bit is set, and further raises coalesce into the one delivery
     * {@link #requestIrq} makes. After removal raises are dropped.
     *
     * @throws IllegalArgumentException when the vector does not exist
     */
    void raiseMsix(int vector);

    /**
     * Surprise hot-unplug (the device model's bundle stopped, or the model pulled the card):
     * marks the function not present, runs the removal listeners, unregisters the function's
     * service (deactivating drivers bound to it, on this thread), frees every IRQ (waiting for
     * running handlers) and frees the BAR memory as soon as no MMIO access is in flight.
     * Idempotent: a second call returns at once.
     *
     * @see "pciehp_unconfigure_device(), pci_dev_set_disconnected() in drivers/pci"
     */
    void remove();
}
