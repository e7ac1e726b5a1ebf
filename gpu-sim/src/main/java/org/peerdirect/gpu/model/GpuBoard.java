package org.peerdirect.gpu.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.LongAdder;

import org.peerdirect.gpu.engine.GpuEngine;
import org.peerdirect.kernel.pci.PciDeviceSpec;

/**
 * The silicon of a data-centre GPU (an NVIDIA A100 PCIe by default): video memory in 64 KiB GPU
 * pages, a BAR1 window whose 64 KiB slots the GPU maps onto video-memory pages, and a copy engine.
 * What the driver does with them (allocation, contexts, unified addresses, peer-to-peer pinning)
 * is the driver's ({@code org.peerdirect.gpu.nvidia}); this class only holds what hardware holds
 * and imports nothing of the IB stack.
 *
 * <p>Video memory is host memory committed page by page on first touch ({@code Mm.deviceMemory}),
 * so a 1 GiB GPU costs the host what was touched of it; the board counts the 2 MiB chunks its
 * copy engine or a peer reached ({@link #committedBytes}). BAR1 is an aperture BAR ({@link org.peerdirect.kernel.pci.BarAperture}):
 * a peer's DMA to a BAR1 page lands in the video-memory page the slot maps <em>now</em>; a slot the
 * driver unmapped is a use-after-free for the IOMMU audit.
 *
 * <p>Thread safety: the BAR1 page table is an atomic array read lock-free by every peer DMA; the
 * touched-chunk set is atomic; copies take no lock (the driver owns the pages it copies).
 */
public final class GpuBoard implements GpuEngine {

    public static final int VENDOR_NVIDIA = 0x10de;
    /** {@code 10de:20f1}, "GA100 [A100 PCIe 40GB]". */
    public static final int DEVICE_A100_PCIE_40GB = 0x20f1;
    /** 3D controller. */
    public static final int CLASS_3D_CONTROLLER = 0x030200;
    /** {@code NV_PMC_BOOT_0} at BAR0 offset 0: architecture GA100, implementation 0, revision a1. */
    public static final int NV_PMC_BOOT_0_GA100 = 0x170000a1;
    /** BAR0 (registers) is 16 MiB on an A100; only its first page (PMC) is modelled. */
    public static final long BAR0_SIZE = 16L << 20;

    private static final long CHUNK = 2L << 20;

    private final String name;
    private final long vramBytes;
    private final long bar1Bytes;
    private final Arena arena = Arena.ofShared();
    /** All of video memory, committed by the host where touched. */
    private final MemorySegment vram;
    /** 2 MiB chunks the copy engine or a peer touched. */
    private final java.util.concurrent.atomic.AtomicLongArray touched;
    /** BAR1 slot -> video-memory page + 1, 0 when the slot maps nothing. */
    private final AtomicIntegerArray bar1;
    /**
     * The 64 KiB view of each video-memory page, made on first use and kept: a peer's DMA through
     * BAR1 asks for a page per transfer, and a view made each time is an allocation per DMA. A
     * racing first use makes two equal views, one kept (views are immutable).
     */
    private final MemorySegment[] pageViews;
    private final MemorySegment pmc;
    private final LongAdder copied = new LongAdder();
    private volatile boolean dead;

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
        this.vram = org.peerdirect.kernel.mm.Mm.deviceMemory(vramBytes, arena);
        this.touched = new java.util.concurrent.atomic.AtomicLongArray((int) ((vramBytes / CHUNK + 63) / 64));
        this.bar1 = new AtomicIntegerArray(Math.toIntExact(bar1Bytes / GPU_PAGE_SIZE));
        this.pageViews = new MemorySegment[Math.toIntExact(vramBytes / GPU_PAGE_SIZE)];
        this.pmc = arena.allocate(4096, 4096);
        pmc.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 0, NV_PMC_BOOT_0_GA100);
    }

    /** The PCI function to plug in: BAR0 registers, BAR1 the window onto video memory; the engine as its firmware interface. */
    public PciDeviceSpec spec() {
        return PciDeviceSpec.builder(name).vendorId(VENDOR_NVIDIA).deviceId(DEVICE_A100_PCIE_40GB).classCode(CLASS_3D_CONTROLLER)
                .aperture(0, BAR0_SIZE, off -> off == 0 && !dead ? pmc : null)
                .aperture(1, bar1Bytes, this::bar1Page)
                .firmware(this)
                .build();
    }

    /** The aperture: the video memory behind BAR1 offset {@code off} now, to the end of its 64 KiB page, or null. */
    private MemorySegment bar1Page(long off) {
        if (dead) {
            return null;
        }
        int e = bar1.get((int) (off / GPU_PAGE_SIZE));
        if (e == 0) {
            return null;
        }
        // from the page to the end of the 64 KiB GPU page the slot maps: contiguous behind the slot's later BAR pages
        long in = off & (GPU_PAGE_SIZE - 1) & -4096L;
        MemorySegment page = page(e - 1);
        return in == 0 ? page : page.asSlice(in);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public int vramPages() {
        return (int) (vramBytes / GPU_PAGE_SIZE);
    }

    @Override
    public int bar1Slots() {
        return bar1.length();
    }

    /** The 64 KiB of video-memory page {@code p}; marks its chunk touched. */
    private MemorySegment page(int p) {
        touch(p);
        MemorySegment view = pageViews[p];
        if (view == null) {
            view = vram.asSlice((long) p * GPU_PAGE_SIZE, GPU_PAGE_SIZE);
            pageViews[p] = view;
        }
        return view;
    }

    /** Marks the 2 MiB chunk of video-memory page {@code p} touched. */
    private void touch(int p) {
        long c = (long) p * GPU_PAGE_SIZE / CHUNK;
        long bit = 1L << (c & 63);
        if ((touched.get((int) (c >>> 6)) & bit) == 0) {
            touched.getAndAccumulate((int) (c >>> 6), bit, (a, b) -> a | b);
        }
    }

    @Override
    public MemorySegment cpuView(int first, int count) {
        if (count <= 0 || first < 0 || first + count > vramPages()) {
            throw new IllegalArgumentException(String.format("%s: pages %d+%d are outside video memory", name, first, count));
        }
        return vram.asSlice((long) first * GPU_PAGE_SIZE, count * GPU_PAGE_SIZE); // PROT_NONE: touches nothing
    }

    private void checkPage(int p, long off, long len) {
        if (p < 0 || p >= vramPages() || off < 0 || len < 0 || off + len > GPU_PAGE_SIZE) {
            throw new IllegalArgumentException(String.format("%s: video-memory page %d offset 0x%x length %d is outside the page or memory", name, p, off, len));
        }
        if (dead) {
            throw new IllegalStateException(name + ": the GPU was removed");
        }
    }

    @Override
    public void write(int page, long off, byte[] src, int srcOff, int len) {
        checkPage(page, off, len);
        MemorySegment.copy(src, srcOff, page(page), java.lang.foreign.ValueLayout.JAVA_BYTE, off, len);
        copied.add(len);
    }

    @Override
    public void read(int page, long off, byte[] dst, int dstOff, int len) {
        checkPage(page, off, len);
        MemorySegment.copy(page(page), java.lang.foreign.ValueLayout.JAVA_BYTE, off, dst, dstOff, len);
        copied.add(len);
    }

    @Override
    public void copy(int srcPage, long srcOff, int dstPage, long dstOff, long len) {
        checkPage(srcPage, srcOff, len);
        checkPage(dstPage, dstOff, len);
        MemorySegment.copy(page(srcPage), srcOff, page(dstPage), dstOff, len);
        copied.add(len);
    }

    @Override
    public void bar1Map(int slot, int page) {
        checkPage(page, 0, 0);
        if (!bar1.compareAndSet(slot, 0, page + 1)) {
            throw new IllegalStateException(name + ": BAR1 slot " + slot + " already maps page " + (bar1.get(slot) - 1));
        }
    }

    @Override
    public void bar1Unmap(int slot) {
        if (bar1.getAndSet(slot, 0) == 0) {
            throw new IllegalStateException(name + ": BAR1 slot " + slot + " maps nothing");
        }
    }

    @Override
    public int bar1Mapped() {
        int n = 0;
        for (int i = 0; i < bar1.length(); i++) {
            if (bar1.get(i) != 0) {
                n++;
            }
        }
        return n;
    }

    @Override
    public long committedBytes() {
        long n = 0;
        for (int i = 0; i < touched.length(); i++) {
            n += Long.bitCount(touched.get(i));
        }
        return n * CHUNK;
    }

    @Override
    public long copiedBytes() {
        return copied.sum();
    }

    /**
     * The card is gone (its function removed): the window maps nothing any more, then the video
     * memory is freed. A peer DMA still in flight through the window fails as a use-after-free,
     * it never touches freed memory (the segments' scope is closed).
     */
    public void close() {
        dead = true;
        arena.close();
    }
}
