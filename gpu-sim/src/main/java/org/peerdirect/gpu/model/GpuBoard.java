package org.peerdirect.gpu.model;

import java.lang.foreign.Arena;

import org.peerdirect.gpu.ifc.GpuRegs;
import org.peerdirect.gpu.ifc.GpuRpc;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The silicon of a data-centre GPU (an NVIDIA A100 PCIe by default): video memory in 64 KiB GPU
 * pages, a BAR1 window whose 64 KiB slots the GPU maps onto video-memory pages, a copy engine, and
 * a firmware that takes commands from queues in host memory. What the driver does with them
 * (allocation, contexts, unified addresses, peer-to-peer pinning) is the driver's
 * ({@code org.peerdirect.gpu.nvidia}); this class only holds what hardware holds and imports
 * nothing of the IB stack.
 *
 * <p>The driver reaches it only through its PCI function ({@link org.peerdirect.gpu.ifc}):
 * <ul>
 * <li>BAR0, registers: {@code NV_PMC_BOOT_0} and the model's own block that sets up the command
 * and message queues ({@link GpuRegs}); the commands themselves ({@link GpuRpc}: video-memory
 * pages, BAR1 map and unmap, copies, queries) are executed by {@link Gsp};</li>
 * <li>BAR1, an aperture BAR ({@link org.peerdirect.kernel.pci.BarAperture}): a peer's DMA to a
 * BAR1 page lands in the video-memory page the slot maps <em>now</em>; a slot the driver unmapped
 * is a use-after-free for the IOMMU audit;</li>
 * <li>BAR2, the model's own window onto all of video memory ({@link GpuRegs#CPU_WINDOW_BAR});</li>
 * <li>MSI-X vector 0 after the firmware answered; DMA to host memory through the GPU's IOMMU
 * domain only.</li>
 * </ul>
 *
 * <p>Video memory is host memory committed page by page on first touch ({@code Mm.deviceMemory}),
 * so a 1 GiB GPU costs the host what was touched of it; the board counts the 2 MiB chunks its copy
 * engine or a peer reached ({@link #committedBytes}).
 */
public final class GpuBoard {

    public static final int VENDOR_NVIDIA = 0x10de;
    /** {@code 10de:20f1}, "GA100 [A100 PCIe 40GB]". */
    public static final int DEVICE_A100_PCIE_40GB = 0x20f1;
    /** 3D controller. */
    public static final int CLASS_3D_CONTROLLER = 0x030200;
    /** {@code NV_PMC_BOOT_0} at BAR0 offset 0: architecture GA100, implementation 0, revision a1. */
    public static final int NV_PMC_BOOT_0_GA100 = GpuRegs.NV_PMC_BOOT_0_GA100;
    /** BAR0 (registers) is 16 MiB on an A100; {@code NV_PMC_BOOT_0} and the model's own block are modelled. */
    public static final long BAR0_SIZE = 16L << 20;
    /** The GPU page: 64 KiB. */
    public static final long GPU_PAGE_SIZE = GpuRpc.PAGE_SIZE;

    private static final long CHUNK = 2L << 20;

    private final String name;
    private final long vramBytes;
    private final long bar1Bytes;
    private final VideoMemory mem;
    /** The firmware's scratch buffers. */
    private final Arena arena = Arena.ofShared();
    private volatile Gsp gsp;

    /** The sizes a board can have, refused by name otherwise (before anything is made of them). */
    public static void checkSizes(long vramBytes, long bar1Bytes) {
        if (vramBytes < CHUNK || vramBytes > (64L << 30) || vramBytes % CHUNK != 0) {
            throw new IllegalArgumentException("video memory of " + vramBytes + " bytes: must be a multiple of 2 MiB from 2 MiB to 64 GiB");
        }
        if (bar1Bytes < GPU_PAGE_SIZE || bar1Bytes > (64L << 30) || Long.bitCount(bar1Bytes) != 1) {
            throw new IllegalArgumentException("BAR1 of " + bar1Bytes + " bytes: must be a power of two from 64 KiB to 64 GiB");
        }
    }

    /**
     * @param vramBytes video memory: a multiple of 2 MiB, 2 MiB to 64 GiB
     * @param bar1Bytes the BAR1 aperture: a power of two, 64 KiB to 64 GiB (may be smaller than video memory, as on most GPUs)
     */
    public GpuBoard(String name, long vramBytes, long bar1Bytes) {
        checkSizes(vramBytes, bar1Bytes);
        this.name = name;
        this.vramBytes = vramBytes;
        this.bar1Bytes = bar1Bytes;
        this.mem = new VideoMemory(vramBytes, bar1Bytes);
    }

    /** The PCI function to plug in (once): BAR0 registers, BAR1 the window for peers, BAR2 the CPU window, one MSI-X vector. */
    public PciDeviceSpec spec() {
        return PciDeviceSpec.builder(name).vendorId(VENDOR_NVIDIA).deviceId(DEVICE_A100_PCIE_40GB).classCode(CLASS_3D_CONTROLLER)
                .bar(GpuRegs.BAR0, BAR0_SIZE, this::bar0Written)
                .aperture(GpuRegs.BAR1, bar1Bytes, mem::bar1Page)
                .aperture(GpuRegs.CPU_WINDOW_BAR, Long.highestOneBit(vramBytes - 1) << 1, mem::cpuWindowPage)
                .msixVectors(GpuRegs.MSIX_VECTORS)
                .powerOn(this::powerOn)
                .build();
    }

    /** Power-on reset: the firmware comes up with the function's BAR0 and IOMMU domain. */
    private synchronized void powerOn(PciFunction fn) {
        if (gsp != null) {
            throw new IllegalStateException(name + ": the board is plugged in already");
        }
        gsp = new Gsp(fn, mem, arena);
    }

    private void bar0Written(int bar, long offset, int width, long value) {
        Gsp g = gsp;
        if (g != null) {
            g.written(bar, offset, width, value);
        }
    }

    public String name() {
        return name;
    }

    /** Video memory touched so far by the copy engine or a peer, in 2 MiB chunks (what the host had to commit). */
    public long committedBytes() {
        return mem.committedBytes();
    }

    /** Bytes the copy engine moved. */
    public long copiedBytes() {
        return mem.copiedBytes();
    }

    /** BAR1 slots mapped now. */
    public int bar1Mapped() {
        return mem.bar1Mapped();
    }

    /**
     * The card is gone (its function removed): the windows map nothing any more, then the video
     * memory is freed. A peer DMA still in flight through the window fails as a use-after-free,
     * it never touches freed memory (the segments' scope is closed).
     */
    public void close() {
        mem.close();
        Gsp g = gsp;
        if (g != null) {
            g.close(); // waits for a doorbell being served, then the scratch buffers go
        }
        arena.close();
    }
}
