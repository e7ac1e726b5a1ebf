package org.peerdirect.gpu.nvidia;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmemDmabuf;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.testkit.Machine;

/**
 * The GPU as a dma-buf exporter under the IB core's imports ({@code ib_umem_dmabuf_*}), with a
 * test DMA device as the importer: dynamic imports map on demand and give BAR1 back on
 * move_notify; pinned imports cannot be moved; a revocable pinned import lets go when the GPU
 * goes, a non-revocable one is reported; an unaligned range or an importer without peer-to-peer
 * is refused.
 */
class GpuDmabufTest {

    @TempDir
    Path tmp;
    Machine m;
    GpuBoard board;
    NvidiaRm rm;
    AddressSpace proc;
    IommuDomain domain;
    DmaDevice dev;
    boolean gpuGone;

    @BeforeEach
    void up() {
        m = Machine.builder(tmp).build();
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
        rm = new NvidiaRm(m.mm(), m.plug(board.spec()), 0);
        proc = m.process("app");
        domain = m.domain("importer0");
        dev = Machine.dmaDevice(domain);
    }

    @AfterEach
    void down() {
        List<String> left = gpuGone ? List.of() : rm.shutdown();
        board.close();
        m.close(); // the audit
        assertEquals(List.of(), left);
    }

    private static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ;

    @Test
    void aDynamicImportMapsOnDemandAndGivesBar1BackOnMove() throws Exception {
        long dptr = rm.cuMemAlloc(proc, 256 << 10);
        byte[] data = new byte[4096];
        java.util.Arrays.fill(data, (byte) 0x5a);
        rm.cuMemcpyHtoD(proc, dptr + (128 << 10), data, 0, data.length);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 256 << 10);
        AtomicInteger moves = new AtomicInteger();
        IbUmemDmabuf u = m.umems().umemDmabufGet(proc, dev, 64 << 10, 128 << 10, fd, RW, x -> moves.incrementAndGet());
        assertEquals(0, rm.usedSlots(), "nothing mapped before the driver asks");
        u.lock();
        try {
            u.mapPages();
        } finally {
            u.unlock();
        }
        assertEquals(4, rm.usedSlots(), "the whole buffer in BAR1");
        byte[] got = new byte[4096];
        domain.read(u.dmaAddressOf(64 << 10), MemorySegment.ofArray(got), 0, got.length);
        assertArrayEquals(data, got, "byte 64 KiB of the import is byte 128 KiB of the allocation");
        assertEquals(4, rm.dmaBufEvictBar1(proc, fd));
        assertEquals(1, moves.get(), "the driver's move_notify ran");
        assertFalse(u.mapped(), "the core unmapped after it");
        u.release();
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        assertEquals(0, rm.usedPages(), "the last reference released the pages");
    }

    @Test
    void aPinnedImportCannotMoveAndARevocableOneLetsGoWhenTheGpuGoes() throws Exception {
        long dptr = rm.cuMemAlloc(proc, 128 << 10);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 128 << 10);
        AtomicInteger revoked = new AtomicInteger();
        IbUmemDmabuf pinned = m.umems().umemDmabufGetPinned(proc, dev, 0, 128 << 10, fd, RW, x -> revoked.incrementAndGet());
        assertTrue(pinned.mapped(), "pinned and mapped at creation");
        KernelException busy = assertThrows(KernelException.class, () -> rm.dmaBufEvictBar1(proc, fd), "a pinned buffer cannot move");
        assertEquals(KernelException.Errno.EBUSY, busy.errno(), busy.getMessage());
        rm.cuMemFree(proc, dptr); // the buffer keeps the pages
        assertEquals(List.of(), rm.shutdown(), "the revocable import let go");
        gpuGone = true;
        assertEquals(KernelException.Errno.ENODEV, assertThrows(KernelException.class, () -> rm.cuMemGetHandleForAddressRange(proc, dptr, 4096)).errno(),
                "no export once the GPU is going");
        assertEquals(1, revoked.get());
        assertTrue(pinned.revoked());
        assertFalse(pinned.mapped());
        assertEquals(0, domain.mappedPages(), "nothing of the GPU left in the importer's domain");
        KernelException again = assertThrows(KernelException.class, () -> {
            pinned.lock();
            try {
                pinned.mapPages();
            } finally {
                pinned.unlock();
            }
        });
        assertEquals(KernelException.Errno.EINVAL, again.errno());
        pinned.release();
        proc.close(fd);
    }

    @Test
    void aNonRevocablePinnedImportIsReportedWhenTheGpuGoes() throws Exception {
        long dptr = rm.cuMemAlloc(proc, 64 << 10);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 64 << 10);
        IbUmemDmabuf pinned = m.umems().umemDmabufGetPinned(proc, dev, 0, 64 << 10, fd, RW, null);
        List<String> left = rm.shutdown();
        gpuGone = true;
        assertTrue(left.get(0).contains("non-revocable"), left.toString());
        assertTrue(left.stream().anyMatch(l -> l.contains("1 BAR1 slots still mapped")), "the slot it keeps is named: " + left);
        pinned.release(); // the importer lets go itself: unmapped then
        assertEquals(0, domain.mappedPages());
        proc.close(fd);
    }

    @Test
    void badExportsAndImportsAreRefused() throws Exception {
        long dptr = rm.cuMemAlloc(proc, 64 << 10);
        assertEquals(KernelException.Errno.EINVAL,
                assertThrows(KernelException.class, () -> rm.cuMemGetHandleForAddressRange(proc, dptr, 100)).errno());
        assertEquals(KernelException.Errno.EINVAL,
                assertThrows(KernelException.class, () -> rm.cuMemGetHandleForAddressRange(proc, dptr, 128 << 10)).errno(), "past the allocation");
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 64 << 10);
        var buf = org.peerdirect.kernel.dmabuf.DmaBuf.get(proc, fd);
        KernelException noP2p = assertThrows(KernelException.class, () -> buf.dynamicAttach(domain, "cpu-only", new org.peerdirect.kernel.dmabuf.DmaBufImporterOps() {
            @Override
            public boolean allowPeer2Peer() {
                return false;
            }

            @Override
            public void moveNotify(org.peerdirect.kernel.dmabuf.DmaBufAttachment a) {
            }
        }, null));
        assertEquals(KernelException.Errno.EOPNOTSUPP, noP2p.errno());
        buf.put();
        assertEquals(KernelException.Errno.EINVAL,
                assertThrows(KernelException.class, () -> m.umems().umemDmabufGet(proc, dev, 0, 128 << 10, fd, RW, x -> { })).errno(),
                "past the buffer's end");
        // another exporter's buffer is not this GPU's to move
        var foreign = org.peerdirect.kernel.dmabuf.DmaBuf.export("other", 4096, new org.peerdirect.kernel.dmabuf.DmaBufOps() {
            @Override
            public org.peerdirect.kernel.dma.SgTable map(org.peerdirect.kernel.dmabuf.DmaBufAttachment a, org.peerdirect.kernel.dma.DmaDirection d) {
                throw new AssertionError();
            }

            @Override
            public void unmap(org.peerdirect.kernel.dmabuf.DmaBufAttachment a, org.peerdirect.kernel.dma.SgTable sg,
                    org.peerdirect.kernel.dma.DmaDirection d) {
            }

            @Override
            public void release(org.peerdirect.kernel.dmabuf.DmaBuf b) {
            }
        });
        int other = foreign.fd(proc);
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> rm.dmaBufEvictBar1(proc, other)).errno());
        proc.close(other);
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
    }
}
