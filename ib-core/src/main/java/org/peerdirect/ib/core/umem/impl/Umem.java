package org.peerdirect.ib.core.umem.impl;

import static org.peerdirect.kernel.dma.SgTable.PAGE_SIZE;

import java.util.Arrays;

import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.SgTable;

/**
 * {@code struct ib_umem} ({@code drivers/infiniband/core/umem.c}): what pinned umems
 * ({@link UmemPinned}) and peer umems ({@code org.peerdirect.ib.core.peer.PeerUmem},
 * {@code struct ib_umem_peer} embeds a {@code struct ib_umem}) share: the range, its page count
 * ({@code ib_umem_num_pages}) and the lookup of DMA addresses in the blocks.
 *
 * <p>Public (in this private package) only so that the peer package can extend it; the blocks
 * are set once by the subclass before the umem reaches a driver and never change afterwards.
 */
public abstract class Umem implements IbUmem {

    protected final AddressSpace mm;
    protected final DmaDevice device;
    protected final long address;
    protected final long length;
    protected final boolean writable;
    protected final long npages;
    /** Set once the blocks are final (before the umem is handed to the driver). */
    private SgTable blocks;
    /** blockStart[i]: offset of block i from the aligned start; one extra entry for the end. */
    private long[] blockStart;

    protected Umem(AddressSpace mm, DmaDevice device, long address, long length, boolean writable) {
        this.mm = mm;
        this.device = device;
        this.address = address;
        this.length = length;
        this.writable = writable;
        this.npages = numPages(address, length);
    }

    /** {@code ib_umem_num_pages}. */
    public static long numPages(long address, long length) {
        return (alignUp(address + length, PAGE_SIZE) - alignDown(address, PAGE_SIZE)) / PAGE_SIZE;
    }

    protected static long alignDown(long v, long a) {
        return v & -a;
    }

    protected static long alignUp(long v, long a) {
        return (v + a - 1) & -a;
    }

    protected final void setBlocks(SgTable t) {
        long[] start = new long[t.nents() + 1];
        for (int i = 0; i < t.nents(); i++) {
            start[i + 1] = start[i] + t.length(i);
        }
        if (start[t.nents()] != npages * PAGE_SIZE) {
            throw new IllegalArgumentException(String.format("DMA blocks cover %d bytes, the page-aligned range 0x%x+%d needs %d",
                    start[t.nents()], alignDown(address, PAGE_SIZE), npages * PAGE_SIZE, npages * PAGE_SIZE));
        }
        blockStart = start;
        blocks = t;
    }

    @Override
    public final long address() {
        return address;
    }

    @Override
    public final long length() {
        return length;
    }

    @Override
    public final int pid() {
        return mm.pid();
    }

    @Override
    public final boolean writable() {
        return writable;
    }

    @Override
    public final long npages() {
        return npages;
    }

    @Override
    public final SgTable dmaBlocks() {
        return blocks;
    }

    private int blockOf(long off) {
        int i = Arrays.binarySearch(blockStart, off);
        return i >= 0 ? i : -i - 2;
    }

    private long offsetOf(long va) {
        if (va < address || va >= address + length) {
            throw new IllegalArgumentException(String.format("0x%x is outside the registration 0x%x+%d", va, address, length));
        }
        return va - alignDown(address, PAGE_SIZE);
    }

    @Override
    public final long dmaAddressOf(long va) {
        long off = offsetOf(va);
        int i = blockOf(off);
        return blocks.dmaAddress(i) + (off - blockStart[i]);
    }

    @Override
    public final long contiguousBytesAt(long va) {
        long off = offsetOf(va);
        int i = blockOf(off);
        return Math.min(blockStart[i + 1] - off, address + length - va);
    }

    /** The process that registered the range (its memlock charge goes back to it). */
    public final AddressSpace mm() {
        return mm;
    }

    /** The device the blocks are mapped for. */
    public final DmaDevice device() {
        return device;
    }

    protected String describe() {
        return String.format("pid %d 0x%x+%d on %s", mm.pid(), address, length, device.name());
    }
}
