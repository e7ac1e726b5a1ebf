package org.peerdirect.gpu.nvidia;

import static org.peerdirect.gpu.ifc.GpuRpc.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;

import org.peerdirect.gpu.nvidia.GspMsgQueue.Reply;
import org.peerdirect.gpu.nvidia.GspMsgQueue.Rpc;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The resource manager's calls into the GPU's firmware, each a batch of RPCs over
 * {@link GspMsgQueue} (the part of {@code kernel_gsp.c}/nouveau's {@code r535} code that builds
 * RPCs): video-memory pages allocated and freed, BAR1 slots mapped and unmapped, the copy engine
 * between host bytes and video memory (through the staging buffer, by DMA) and within video
 * memory, the GPU's counters. Runs of consecutive pages (and slots) go as one command.
 *
 * <p>The teardown calls ({@link #vramFree}, {@link #bar1Unmap}) do nothing once the GPU is gone or
 * the driver closed: what the card held goes with the card.
 */
final class GpuFw {

    /** A piece of a copy: {@code len} bytes of video-memory page {@code page} from {@code off}. */
    record Piece(int page, int off, int len) {
    }

    /** The GPU's counters ({@code GET_STATS}). */
    record Stats(int bar1Mapped, int allocatedPages, long committedBytes, long copiedBytes) {
    }

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private final String name;
    private final GspMsgQueue q;
    final int vramPages;
    final int bar1Slots;

    /**
     * Brings the queues up and asks the GPU what it has ({@code GET_INFO}).
     *
     * @throws KernelException ENODEV when the function is not a GPU of this model, EIO when it refuses its queues
     */
    GpuFw(String name, Mm mm, PciFunction fn) {
        this.name = name;
        this.q = new GspMsgQueue(name, mm, fn);
        try {
            Reply info = one(new Rpc(GET_INFO, 0, p -> { }), false);
            if (info.params().byteSize() < INFO_LEN || info.params().get(INT, INFO_PAGE_SHIFT) != PAGE_SHIFT) {
                throw new KernelException(Errno.ENODEV, String.format("%s (%s): GET_INFO answered %d bytes, not pages of 64 KiB", name, fn.bdf(),
                        info.params().byteSize()));
            }
            vramPages = info.params().get(INT, INFO_VRAM_PAGES);
            bar1Slots = info.params().get(INT, INFO_BAR1_SLOTS);
        } catch (RuntimeException e) {
            q.close();
            throw e;
        }
    }

    private Reply one(Rpc r, boolean quiet) {
        List<Reply> a = q.submit(List.of(r), quiet);
        if (a.isEmpty()) {
            return null;
        }
        GspMsgQueue.check(name, a.get(0));
        return a.get(0);
    }

    private void all(List<Rpc> rpcs, boolean quiet) {
        for (Reply r : q.submit(rpcs, quiet)) {
            GspMsgQueue.check(name, r);
        }
    }

    private static Rpc pages(int function, int first, int count) {
        return new Rpc(function, P_LEN, p -> {
            p.set(INT, P_PAGE, first);
            p.set(INT, P_COUNT, count);
        });
    }

    /** Runs of {@code a} where {@code a[i] == a[i-1] + 1} and {@code joins(i)}: {first index, length} each. */
    private static List<int[]> runs(int[] a, IntPredicate joins) {
        List<int[]> out = new ArrayList<>();
        int i = 0;
        while (i < a.length) {
            int j = i + 1;
            while (j < a.length && a[j] == a[j - 1] + 1 && joins.test(j)) {
                j++;
            }
            out.add(new int[] {i, j - i});
            i = j;
        }
        return out;
    }

    /** {@code VRAM_ALLOC} of the pages. */
    void vramAlloc(int[] pages) {
        all(runs(pages, j -> true).stream().map(r -> pages(VRAM_ALLOC, pages[r[0]], r[1])).toList(), false);
    }

    /** {@code VRAM_FREE} of the pages; nothing once the GPU is gone. */
    void vramFree(int[] pages) {
        if (pages.length > 0) {
            all(runs(pages, j -> true).stream().map(r -> pages(VRAM_FREE, pages[r[0]], r[1])).toList(), true);
        }
    }

    /** {@code BAR1_MAP}: slot {@code slots[i]} shows page {@code pages[i]}. */
    void bar1Map(int[] slots, int[] pages) {
        all(runs(slots, j -> pages[j] == pages[j - 1] + 1).stream().map(r -> new Rpc(BAR1_MAP, MAP_LEN, p -> {
            p.set(INT, MAP_SLOT, slots[r[0]]);
            p.set(INT, MAP_PAGE, pages[r[0]]);
            p.set(INT, MAP_COUNT, r[1]);
        })).toList(), false);
    }

    /** {@code BAR1_UNMAP} of the slots; nothing once the GPU is gone. */
    void bar1Unmap(int[] slots) {
        if (slots.length > 0) {
            all(runs(slots, j -> true).stream().map(r -> pages(BAR1_UNMAP, slots[r[0]], r[1])).toList(), true);
        }
    }

    /** {@code GET_STATS}; null once the GPU is gone. */
    Stats stats() {
        Reply r = one(new Rpc(GET_STATS, 0, p -> { }), true);
        if (r == null) {
            return null;
        }
        MemorySegment s = r.params();
        return new Stats(s.get(INT, STATS_BAR1_MAPPED), s.get(INT, STATS_ALLOCATED_PAGES), s.get(LONG, STATS_COMMITTED_BYTES),
                s.get(LONG, STATS_COPIED_BYTES));
    }

    /**
     * The copy engine between host bytes {@code host[off..]} and the pieces, in order: host to
     * device ({@code toDevice}) or back, through the staging buffer a staging-full at a time.
     */
    void copy(List<Piece> pieces, byte[] host, int off, boolean toDevice) {
        q.lock.lock(); // the staging buffer is one
        try {
            int i = 0;
            int done = 0;
            while (i < pieces.size()) {
                List<Rpc> batch = new ArrayList<>();
                int at = 0;
                int first = i;
                for (; i < pieces.size() && at + pieces.get(i).len() <= GspMsgQueue.STAGING_BYTES; i++) {
                    Piece pc = pieces.get(i);
                    long bus = q.stagingAddress(at);
                    if (toDevice) {
                        MemorySegment.copy(host, off + done + at, q.staging, ValueLayout.JAVA_BYTE, at, pc.len());
                    }
                    batch.add(new Rpc(toDevice ? CE_COPY_H2D : CE_COPY_D2H, CE_LEN, p -> {
                        p.set(INT, CE_PAGE, pc.page());
                        p.set(INT, CE_OFFSET, pc.off());
                        p.set(INT, CE_LENGTH, pc.len());
                        p.set(LONG, CE_HOST_ADDR, bus);
                    }));
                    at += pc.len();
                }
                all(batch, false);
                if (!toDevice) {
                    MemorySegment.copy(q.staging, ValueLayout.JAVA_BYTE, 0, host, off + done, at);
                }
                done += at;
                assert i > first;
            }
        } finally {
            q.lock.unlock();
        }
    }

    /** {@code CE_COPY_D2D} of each pair of pieces (equal lengths, each within its page). */
    void copyDevice(List<Piece[]> pairs) {
        all(pairs.stream().map(pr -> new Rpc(CE_COPY_D2D, D2D_LEN, p -> {
            p.set(INT, D2D_SRC_PAGE, pr[0].page());
            p.set(INT, D2D_SRC_OFFSET, pr[0].off());
            p.set(INT, D2D_DST_PAGE, pr[1].page());
            p.set(INT, D2D_DST_OFFSET, pr[1].off());
            p.set(INT, D2D_LENGTH, pr[0].len());
        })).toList(), false);
    }

    /** Pages of the driver's own mapped for the GPU (queues, staging buffer). */
    int dmaPages() {
        return q.dmaPages();
    }

    /** Switches the queues off and frees their memory; the calls above fail (or, teardown, do nothing) from now on. */
    void close() {
        q.close();
    }
}
