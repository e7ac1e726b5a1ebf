package org.peerdirect.gpu.nvidia;

import static org.peerdirect.gpu.nvidia.NvidiaRm.P2P_PAGE_SIZE;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.peerdirect.gpu.ifc.GpuRegs;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.dmabuf.DmaBuf;
import org.peerdirect.kernel.dmabuf.DmaBufAttachment;
import org.peerdirect.kernel.dmabuf.DmaBufOps;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One GPU's dma-buf exports ({@code kernel-open/nvidia/nv-dmabuf.c}): a buffer references its
 * pages (a free of the allocation leaves them to the buffer until its last reference goes); an
 * importer must allow peer-to-peer (video memory cannot be migrated to system memory here);
 * mapping an attachment takes BAR1 slots and maps them into the importer's domain;
 * {@link #evictBar1} takes the slots back from dynamic importers ({@code move_notify}: the next
 * access re-maps); {@link #revokeAll} revokes every buffer when the GPU goes.
 *
 * <p>Lock: the RM's monitor ({@code rmLock}) guards the exports and, through {@link GpuMemory},
 * the pages and slots; it is never held while importers are called back (revoke, move_notify run
 * under the buffer's reservation lock only).
 */
final class NvDmaBuf {

    private final Object rmLock;
    private final String name;
    private final PciFunction fn;
    private final GpuMemory mem;
    /** Exported dma-bufs not yet released; guarded by rmLock. */
    private final List<Export> exports = new ArrayList<>();
    /** The GPU is going: no new export; guarded by rmLock. */
    private boolean shuttingDown;

    NvDmaBuf(Object rmLock, String name, PciFunction fn, GpuMemory mem) {
        this.rmLock = rmLock;
        this.name = name;
        this.fn = fn;
        this.mem = mem;
    }

    /** One exported range: its pages (referenced) and, per mapped attachment, its BAR1 slots and IOMMU addresses. */
    private final class Export implements DmaBufOps {
        final long firstOffset;
        final long length;
        final int[] pages;
        final Map<DmaBufAttachment, long[][]> maps = new HashMap<>();
        DmaBuf buf;
        int pins;

        Export(long firstOffset, long length, int[] pages) {
            this.firstOffset = firstOffset;
            this.length = length;
            this.pages = pages;
        }

        @Override
        public void attach(DmaBufAttachment a) {
            if (!a.importerOps().allowPeer2Peer()) {
                throw new KernelException(Errno.EOPNOTSUPP, name + ": video memory is reachable only peer to peer; "
                        + a.importerName() + " does not allow peer2peer");
            }
        }

        @Override
        public void pin(DmaBufAttachment a) {
            synchronized (rmLock) {
                pins++;
            }
        }

        @Override
        public void unpin(DmaBufAttachment a) {
            synchronized (rmLock) {
                pins--;
            }
        }

        /** BAR1 slots for the pages (ENOMEM when the aperture is full), mapped into the importer's domain. */
        @Override
        public SgTable map(DmaBufAttachment a, DmaDirection dir) {
            synchronized (rmLock) {
                int n = pages.length;
                int freeSlots = mem.freeSlots();
                if (n > freeSlots) {
                    throw new KernelException(Errno.ENOMEM, String.format("%s: the dma-buf's %d pages do not fit in BAR1 (%d of %d slots free)",
                            name, n, freeSlots, mem.gpu.bar1Slots));
                }
                int[] slots = mem.mapSlots(pages);
                long[] iovas = new long[n];
                int dmaMapped = 0;
                try {
                    for (int i = 0; i < n; i++) {
                        iovas[i] = a.importer().dmaMapResource(fn.resource(GpuRegs.BAR1), slots[i] * P2P_PAGE_SIZE, P2P_PAGE_SIZE, dir);
                        dmaMapped++;
                    }
                } catch (RuntimeException e) { // undo what was done, in reverse
                    for (int i = 0; i < dmaMapped; i++) {
                        a.importer().dmaUnmap(iovas[i], (int) (P2P_PAGE_SIZE / 4096));
                    }
                    mem.unmapSlots(slots);
                    throw e;
                }
                maps.put(a, new long[][] {iovas, java.util.Arrays.stream(slots).asLongStream().toArray()});
                // the exported range within the pages: the first page from firstOffset, the last trimmed
                long[] addr = new long[n];
                long[] len = new long[n];
                long left = length;
                for (int i = 0; i < n; i++) {
                    long off = i == 0 ? firstOffset : 0;
                    addr[i] = iovas[i] + off;
                    len[i] = Math.min(P2P_PAGE_SIZE - off, left);
                    left -= len[i];
                }
                return SgTable.of(addr, len);
            }
        }

        @Override
        public void unmap(DmaBufAttachment a, SgTable sg, DmaDirection dir) {
            synchronized (rmLock) {
                long[][] m = maps.remove(a);
                if (m == null) {
                    return;
                }
                int[] slots = new int[m[1].length];
                for (int i = 0; i < m[0].length; i++) {
                    a.importer().dmaUnmap(m[0][i], (int) (P2P_PAGE_SIZE / 4096)); // no DMA through it after this
                    slots[i] = (int) m[1][i];
                }
                mem.unmapSlots(slots);
            }
        }

        @Override
        public void release(DmaBuf b) {
            synchronized (rmLock) {
                exports.remove(this);
                mem.unref(pages);
            }
        }
    }

    /**
     * Exports {@code pages} (of one live allocation; [firstOffset, firstOffset+length) of them) as
     * a new buffer referencing them; the caller installs its descriptor outside the RM lock.
     *
     * @throws KernelException ENODEV once the GPU is going
     */
    DmaBuf export(int[] pages, long firstOffset, long length) {
        checkOpen();
        mem.ref(pages); // the buffer keeps them past a free of the allocation
        Export g = new Export(firstOffset, length, pages);
        g.buf = DmaBuf.export("nvidia " + name, length, g); // takes no lock
        exports.add(g); // with its buffer: a shutdown sees it whole or not at all
        return g.buf;
    }

    /** ENODEV once the GPU is going: the first check of an export. */
    void checkOpen() {
        assert Thread.holdsLock(rmLock);
        if (shuttingDown) {
            throw new KernelException(Errno.ENODEV, "cuMemGetHandleForAddressRange: " + name + " is going away (CUDA_ERROR_NO_DEVICE)");
        }
    }

    /** @see NvidiaRm#dmaBufEvictBar1 */
    int evictBar1(AddressSpace proc, int fd) {
        DmaBuf b = DmaBuf.get(proc, fd);
        try {
            Export g;
            int before;
            synchronized (rmLock) {
                g = exports.stream().filter(x -> x.buf == b).findFirst().orElse(null);
                before = mem.usedSlotCount();
            }
            if (g == null) {
                throw new KernelException(Errno.EINVAL, String.format("fd %d is %s, not a dma-buf %s exported", fd, b, name));
            }
            b.lockResv();
            try {
                synchronized (rmLock) {
                    if (g.pins > 0) {
                        throw new KernelException(Errno.EBUSY, b + " is pinned by an importer: its BAR1 pages cannot be taken back");
                    }
                }
                b.moveNotify();
            } finally {
                b.unlockResv();
            }
            synchronized (rmLock) {
                return before - mem.usedSlotCount();
            }
        } finally {
            b.put();
        }
    }

    /** Revokes every exported buffer (the GPU goes; no export from now on); returns what non-revocable pinned importers still hold. */
    List<String> revokeAll() {
        List<Export> all;
        synchronized (rmLock) {
            shuttingDown = true;
            all = new ArrayList<>(exports);
        }
        List<String> stuck = new ArrayList<>();
        for (Export g : all) {
            g.buf.lockResv();
            try {
                for (var a : g.buf.revoke()) {
                    stuck.add(name + ": " + a.importerName() + " keeps a pinned, non-revocable mapping of " + g.buf);
                }
            } catch (RuntimeException e) { // an importer failed: the others and the rest of the shutdown go on
                stuck.add(name + ": revoking " + g.buf + " failed: " + e);
            } finally {
                g.buf.unlockResv();
            }
        }
        return stuck;
    }

    /** Pages the exported buffers hold. */
    BitSet pages() {
        assert Thread.holdsLock(rmLock);
        BitSet held = new BitSet();
        for (Export g : exports) {
            for (int p : g.pages) {
                held.set(p);
            }
        }
        return held;
    }

    int count() {
        assert Thread.holdsLock(rmLock);
        return exports.size();
    }

    int mappings() {
        assert Thread.holdsLock(rmLock);
        return exports.stream().mapToInt(g -> g.maps.size()).sum();
    }
}
