package org.peerdirect.kernel.dmabuf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;

/**
 * The dma-buf core: references by descriptor and attachment, the reservation lock's rules,
 * move_notify (refused while pinned), revocation (dynamic and revocable pinned importers let go,
 * later maps fail), release when the last reference goes. The exporter here hands out host frames.
 */
class DmaBufTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    IommuDomain importer;
    AddressSpace proc;

    /** An exporter of {@code pages} host frames, mapped page by page for the importer. */
    class FrameExporter implements DmaBufOps {
        final long[] pfns;
        boolean released;

        FrameExporter(int pages) {
            pfns = new long[pages];
            for (int i = 0; i < pages; i++) {
                pfns[i] = mm.allocPages(0);
            }
        }

        @Override
        public SgTable map(DmaBufAttachment a, DmaDirection dir) {
            long iova = a.importer().dmaMapSg(pfns, dir);
            return SgTable.of(new long[] {iova}, new long[] {pfns.length * 4096L});
        }

        @Override
        public void unmap(DmaBufAttachment a, SgTable sg, DmaDirection dir) {
            a.importer().dmaUnmap(sg.dmaAddress(0), pfns.length);
        }

        @Override
        public void release(DmaBuf buf) {
            for (long p : pfns) {
                mm.freePages(p, 0);
            }
            released = true;
        }
    }

    /** An importer that unmaps on move_notify. */
    static DmaBufImporterOps dynamic(boolean revocable) {
        return new DmaBufImporterOps() {
            @Override
            public boolean allowPeer2Peer() {
                return true;
            }

            @Override
            public void moveNotify(DmaBufAttachment a) {
                if (a.mapped()) {
                    a.unmap(a.table());
                }
                if (a.pinned()) {
                    a.unpin();
                }
            }

            @Override
            public boolean revocable() {
                return revocable;
            }
        };
    }

    @BeforeEach
    void up() {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        importer = iommu.createDomain("importer0");
        proc = mm.createProcess("app");
    }

    @AfterEach
    void down() {
        proc.exit();
        assertTrue(iommu.audit().clean(), "audit: " + iommu.audit());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame freed");
        mm.close();
    }

    @Test
    void theLastReferenceReleasesTheBuffer() throws Exception {
        FrameExporter e = new FrameExporter(4);
        DmaBuf buf = DmaBuf.export("frames", 4 * 4096, e);
        int fd = buf.fd(proc);
        assertTrue(fd >= 3);
        DmaBuf got = DmaBuf.get(proc, fd);
        assertEquals(buf, got);
        DmaBufAttachment a = got.dynamicAttach(importer, "importer0", dynamic(false), null);
        got.put(); // the get's reference; the attachment keeps one
        proc.close(fd);
        assertFalse(e.released, "the attachment still holds the buffer");
        assertEquals(Errno.EBADF, assertThrows(KernelException.class, () -> DmaBuf.get(proc, fd)).errno());
        a.detach();
        assertTrue(e.released, "released with the last reference");
    }

    @Test
    void mapNeedsTheReservationLockAndMoveNotifyMakesImportersUnmap() {
        FrameExporter e = new FrameExporter(2);
        DmaBuf buf = DmaBuf.export("frames", 2 * 4096, e);
        int fd = buf.fd(proc);
        DmaBufAttachment a = buf.dynamicAttach(importer, "importer0", dynamic(false), null);
        assertThrows(IllegalStateException.class, () -> a.map(DmaDirection.BIDIRECTIONAL), "no reservation lock");
        buf.lockResv();
        try {
            SgTable t = a.map(DmaDirection.BIDIRECTIONAL);
            assertEquals(8192, t.totalLength());
            assertEquals(2, importer.mappedPages());
            assertEquals(Errno.EBUSY, assertThrows(KernelException.class, () -> a.map(DmaDirection.BIDIRECTIONAL)).errno());
            buf.moveNotify();
            assertFalse(a.mapped(), "the importer unmapped on move_notify");
            assertEquals(0, importer.mappedPages());
            a.pin();
            assertThrows(IllegalStateException.class, buf::moveNotify, "a pinned buffer may not move");
            a.unpin();
        } finally {
            buf.unlockResv();
        }
        a.detach();
        DmaBuf.get(proc, fd).put();
    }

    @Test
    void revocationTakesDynamicAndRevocablePinnedMappingsAndFailsLaterMaps() {
        FrameExporter e = new FrameExporter(1);
        DmaBuf buf = DmaBuf.export("frames", 4096, e);
        buf.fd(proc);
        DmaBufAttachment dyn = buf.dynamicAttach(importer, "dyn", dynamic(false), null);
        IommuDomain other = iommu.createDomain("importer1");
        DmaBufAttachment revocable = buf.dynamicAttach(other, "pinned-revocable", dynamic(true), null);
        IommuDomain third = iommu.createDomain("importer2");
        DmaBufAttachment stuck = buf.dynamicAttach(third, "pinned", dynamic(false), null);
        buf.lockResv();
        try {
            dyn.map(DmaDirection.BIDIRECTIONAL);
            revocable.pin();
            revocable.map(DmaDirection.BIDIRECTIONAL);
            stuck.pin();
            stuck.map(DmaDirection.BIDIRECTIONAL);
            List<DmaBufAttachment> left = buf.revoke();
            assertEquals(List.of(stuck), left, "only the non-revocable pinned import keeps its mapping");
            assertFalse(dyn.mapped());
            assertFalse(revocable.mapped());
            KernelException again = assertThrows(KernelException.class, () -> dyn.map(DmaDirection.BIDIRECTIONAL));
            assertEquals(Errno.ENODEV, again.errno());
            assertEquals(Errno.EBUSY, assertThrows(KernelException.class, stuck::detach).errno(), "still mapped");
            stuck.unmap(stuck.table());
            stuck.unpin();
        } finally {
            buf.unlockResv();
        }
        dyn.detach();
        revocable.detach();
        stuck.detach();
        assertFalse(e.released, "the process's descriptor still holds it");
    }

    @Test
    void badExportsAndImportersAreRefused() {
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> DmaBuf.export("x", 100, new FrameExporter(0))).errno());
        DmaBuf buf = DmaBuf.export("x", 4096, new FrameExporter(1));
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> buf.dynamicAttach(importer, "no-ops", null, null)).errno());
        int fd = buf.fd(proc); // released at exit
        assertEquals(Errno.EBADF, assertThrows(KernelException.class, () -> DmaBuf.get(proc, fd + 1)).errno());
    }

    /**
     * Review finding: when the descriptor cannot be installed (the process is exiting), fd()
     * drops the only reference and the exporter's release runs once; an exporter must not
     * release again (two exporters did, double-freeing their pages).
     */
    @Test
    void aDescriptorThatCannotBeInstalledReleasesTheBufferOnce() {
        int[] releases = {0};
        FrameExporter e = new FrameExporter(1) {
            @Override
            public void release(DmaBuf buf) {
                releases[0]++;
                super.release(buf);
            }
        };
        DmaBuf buf = DmaBuf.export("frames", 4096, e);
        AddressSpace gone = mm.createProcess("gone");
        gone.exit();
        KernelException x = assertThrows(KernelException.class, () -> buf.fd(gone));
        assertEquals(Errno.EFAULT, x.errno());
        assertEquals(1, releases[0], "released once, by fd()");
        assertTrue(buf.released());
    }

    /**
     * Fences: an exporter migrates its frames after move_notify and copies the bytes after it
     * released the reservation lock, under a fence; an importer that maps meanwhile gets the new
     * frames and waits for the fence before it may use them; a fence never signalled is ETIMEDOUT.
     */
    @Test
    void anImporterWaitsForTheExportersMigrationFence() throws Exception {
        FrameExporter e = new FrameExporter(1);
        mm.pageAddress(e.pfns[0], 0).fill((byte) 0x3c);
        DmaBuf buf = DmaBuf.export("frames", 4096, e);
        buf.fd(proc);
        DmaBufAttachment a = buf.dynamicAttach(importer, "importer0", dynamic(false), null);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        DmaBuf.Fence fence;
        long old = e.pfns[0];
        Thread copier;
        buf.lockResv();
        try {
            buf.moveNotify(); // nobody mapped yet: nothing to unmap
            e.pfns[0] = mm.allocPages(0); // the new place; the bytes follow under the fence
            fence = buf.addFence();
            DmaBuf.Fence f = fence;
            copier = Thread.ofPlatform().start(() -> {
                try {
                    go.await();
                } catch (InterruptedException x) {
                    return;
                }
                mm.pageAddress(e.pfns[0], 0).copyFrom(mm.pageAddress(old, 0));
                mm.freePages(old, 0);
                f.signal();
            });
        } finally {
            buf.unlockResv();
        }
        byte[] got = new byte[16];
        buf.lockResv();
        try {
            SgTable t = a.map(DmaDirection.BIDIRECTIONAL);
            assertFalse(fence.signalled(), "the copy has not run: the bytes are not there yet");
            go.countDown();
            buf.waitFences(java.time.Duration.ofSeconds(10));
            assertTrue(fence.signalled());
            importer.read(t.dmaAddress(0), java.lang.foreign.MemorySegment.ofArray(got), 0, got.length);
            a.unmap(t);
            DmaBuf.Fence never = buf.addFence();
            KernelException late = assertThrows(KernelException.class, () -> buf.waitFences(java.time.Duration.ofMillis(20)));
            assertEquals(Errno.ETIMEDOUT, late.errno());
            never.signal();
            buf.waitFences(java.time.Duration.ofSeconds(1));
        } finally {
            buf.unlockResv();
        }
        copier.join(10_000);
        byte[] want = new byte[16];
        java.util.Arrays.fill(want, (byte) 0x3c);
        org.junit.jupiter.api.Assertions.assertArrayEquals(want, got, "the importer saw the bytes at their new place");
        a.detach();
    }
}
