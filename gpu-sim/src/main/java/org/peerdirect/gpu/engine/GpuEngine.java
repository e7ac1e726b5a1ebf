package org.peerdirect.gpu.engine;

/**
 * What the GPU driver reaches of the silicon, through {@code PciFunction.firmware(GpuEngine.class)}
 * (the documented shortcut for models whose command interface is not simulated through MMIO):
 * the video-memory pages, the BAR1 page table and the copy engine. Hardware vocabulary only:
 * pages and slots, no processes, no allocations.
 */
@org.osgi.annotation.versioning.ProviderType
public interface GpuEngine {

    /** The GPU page: 64 KiB ({@code GPU_PAGE_SHIFT} 16 in nvidia-peermem). */
    long GPU_PAGE_SIZE = 64L << 10;

    String name();

    /** Video-memory pages of 64 KiB. */
    int vramPages();

    /** 64 KiB slots of the BAR1 aperture. */
    int bar1Slots();

    /** Copy engine: host bytes into video-memory page {@code page} at {@code off}. */
    void write(int page, long off, byte[] src, int srcOff, int len);

    /** Copy engine: video memory into host bytes. */
    void read(int page, long off, byte[] dst, int dstOff, int len);

    /** Copy engine: device to device, within one 64 KiB page on each side. */
    void copy(int srcPage, long srcOff, int dstPage, long dstOff, long len);

    /**
     * The video memory of pages [first, first+count): what a CPU on a coherent link would see of
     * them. A PCIe driver maps it into a process without
     * access rights (an x86 CPU cannot reach {@code cudaMalloc} memory), only so that the range is
     * a device mapping there.
     */
    java.lang.foreign.MemorySegment cpuView(int first, int count);

    /** Programs BAR1 slot {@code slot} to show video-memory page {@code page}; the slot must be free. */
    void bar1Map(int slot, int page);

    /** Clears BAR1 slot {@code slot}: from now on a peer reaching it is a stray access. */
    void bar1Unmap(int slot);

    /** Slots mapped now. */
    int bar1Mapped();

    /** Video memory touched so far by the copy engine or a peer, in 2 MiB chunks (what the host had to commit). */
    long committedBytes();

    /** Bytes the copy engine moved. */
    long copiedBytes();
}
