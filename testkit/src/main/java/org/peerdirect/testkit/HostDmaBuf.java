package org.peerdirect.testkit;

import java.lang.foreign.MemorySegment;
import java.util.IdentityHashMap;
import java.util.Map;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.dmabuf.DmaBuf;
import org.peerdirect.kernel.dmabuf.DmaBufAttachment;
import org.peerdirect.kernel.dmabuf.DmaBufOps;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * A dma-buf over host frames, as {@code drivers/dma-buf/udmabuf.c} exports one: the frames are
 * allocated at export and never move, each importer gets them mapped into its own IOMMU domain
 * ({@code dma_map_sgtable}), and they go back to the allocator with the buffer's last reference.
 * For tests of dma-buf importers ({@code ibv_reg_dmabuf_mr}, {@code ibv_reg_mr_ex} with a
 * dma-buf) that need no GPU.
 *
 * <p>Lock: {@link #maps} is guarded by {@code this}.
 *
 * @since 0.6
 */
public final class HostDmaBuf implements DmaBufOps {

    private final Mm mm;
    private final long[] pfns;
    private final DmaBuf buf;
    private final Map<DmaBufAttachment, Long> maps = new IdentityHashMap<>();

    private HostDmaBuf(Mm mm, long size) {
        this.mm = mm;
        this.pfns = new long[(int) (size / 4096)];
        for (int i = 0; i < pfns.length; i++) {
            pfns[i] = mm.allocPages(0);
            mm.pageAddress(pfns[i], 0).fill((byte) 0);
        }
        this.buf = DmaBuf.export("udmabuf", size, this);
    }

    /** Exports {@code size} bytes (a multiple of 4 KiB) of fresh zeroed frames; the buffer has no reference until {@link #fd}. */
    public static HostDmaBuf export(Mm mm, long size) {
        if (size <= 0 || size % 4096 != 0) {
            throw new IllegalArgumentException("udmabuf: size " + size + " is not a positive multiple of 4096");
        }
        return new HostDmaBuf(mm, size);
    }

    public DmaBuf dmabuf() {
        return buf;
    }

    /** {@code dma_buf_fd}: a descriptor of the buffer in {@code proc} (its reference goes with the descriptor). */
    public int fd(AddressSpace proc) {
        return buf.fd(proc);
    }

    /** The CPU's view of byte {@code off} of the buffer: what a test reads back after a device wrote it. */
    public byte get(long off) {
        return page(off).get(java.lang.foreign.ValueLayout.JAVA_BYTE, off % 4096);
    }

    public void set(long off, byte v) {
        page(off).set(java.lang.foreign.ValueLayout.JAVA_BYTE, off % 4096, v);
    }

    private MemorySegment page(long off) {
        if (off < 0 || off >= buf.size()) {
            throw new IndexOutOfBoundsException("offset " + off + " outside the " + buf.size() + "-byte buffer");
        }
        return mm.pageAddress(pfns[(int) (off / 4096)], 0);
    }

    @Override
    public synchronized SgTable map(DmaBufAttachment a, DmaDirection dir) {
        long iova = a.importer().dmaMapSg(pfns, dir);
        maps.put(a, iova);
        return SgTable.of(new long[] {iova}, new long[] {buf.size()});
    }

    @Override
    public synchronized void unmap(DmaBufAttachment a, SgTable sg, DmaDirection dir) {
        Long iova = maps.remove(a);
        if (iova != null) {
            a.importer().dmaUnmap(iova, pfns.length);
        }
    }

    @Override
    public void release(DmaBuf b) {
        for (long pfn : pfns) {
            mm.freePages(pfn, 0);
        }
    }
}
