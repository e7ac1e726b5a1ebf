package org.peerdirect.ssd.regs;

import java.lang.foreign.MemorySegment;

/**
 * The SSD's firmware shortcut ({@code PciFunction.firmware(PmrWindow.class)}), as the GPU's: the
 * one thing a driver cannot do through MMIO here, handing the memory behind the PMR BAR to the
 * memory manager for a user mapping ({@code io_remap_pfn_range} of the BAR's pages). Everything
 * else (enable, barriers, shutdown, MMIO reads and writes of the window) goes through registers.
 */
@org.osgi.annotation.versioning.ProviderType
public interface PmrWindow {

    /** The memory behind PMR offsets [offset, offset+length), page-aligned, for {@code mmapDevice}. */
    MemorySegment cpuWindow(long offset, long length);
}
