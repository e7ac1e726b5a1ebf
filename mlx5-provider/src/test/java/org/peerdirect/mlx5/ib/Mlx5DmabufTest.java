package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * dma-buf MRs on mlx5 over GPU memory exported with {@code cuMemGetHandleForAddressRange}: the
 * verb's checks, RDMA through BAR1, the exporter moving the buffer (BAR1 taken back: move_notify
 * zaps the mkey's entries, the next access page-faults and re-maps), the GPU going (the buffer
 * revoked: later accesses complete in error, none lands), a free of the allocation under a live
 * buffer (the buffer keeps the pages). Every test ends with the IOMMU audit clean.
 */
class Mlx5DmabufTest extends Mlx5Machine {

    @TempDir
    Path tmp;
    GpuBoard board;
    NvidiaRm rm;
    boolean rmDown;

    void up() {
        startMachine(tmp, "dmabuf-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
        rm = new NvidiaRm(mm, bus.register(board.spec()), 0);
    }

    @AfterEach
    void down() {
        if (rm == null) {
            return;
        }
        List<String> gpuLeft = rmDown ? List.of() : rm.shutdown();
        List<String> left = stopMachine();
        board.close();
        assertEquals(List.of(), gpuLeft, "no video memory or BAR1 slot held");
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }

    byte[] gpuBytes(long dptr, int n) {
        byte[] b = new byte[n];
        rm.cuMemcpyDtoH(proc, b, 0, dptr, n);
        return b;
    }

    @Test
    void theVerbChecksItsArgumentsAsTheKernelDoes() throws Exception {
        up();
        RcEnd e = new RcEnd(1);
        long dptr = rm.cuMemAlloc(proc, 1 << 20);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 1 << 20);
        KernelException access = assertThrows(KernelException.class, () -> e.pd.regDmabufMr(0, 4096, 0, fd, RW | IbAccess.MW_BIND));
        assertEquals(Errno.EINVAL, access.errno(), access.getMessage());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> e.pd.regDmabufMr(0, 4096, 0, fd, IbAccess.REMOTE_WRITE)).errno(),
                "remote write without local write");
        KernelException offs = assertThrows(KernelException.class, () -> e.pd.regDmabufMr(4096, 4096, 0x1800, fd, RW));
        assertTrue(offs.getMessage().contains("page offsets"), offs.getMessage());
        KernelException past = assertThrows(KernelException.class, () -> e.pd.regDmabufMr(1 << 19, 1 << 20, 0, fd, RW));
        assertEquals(Errno.EINVAL, past.errno());
        assertTrue(past.getMessage().contains("past the end"), past.getMessage());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> e.pd.regDmabufMr(0, 0, 0, fd, RW)).errno());
        assertEquals(Errno.EBADF, assertThrows(KernelException.class, () -> e.pd.regDmabufMr(0, 4096, 0, fd + 7, RW)).errno());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> rm.cuMemGetHandleForAddressRange(proc, dptr + 100, 4096)).errno());
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        e.close();
    }

    /** Two connected ends; 1 MiB of GPU memory exported as a dma-buf and registered on end 1 at {@code iova}. */
    private record Rig(RcEnd[] p, long dptr, int fd, long iova, IbvMr dmr) {
    }

    private Rig rig() throws Exception {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long dptr = rm.cuMemAlloc(proc, 1 << 20);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 1 << 20);
        long iova = 0x7f00_0000_0000L;
        return new Rig(p, dptr, fd, iova, p[1].pd.regDmabufMr(0, 1 << 20, iova, fd, RW));
    }

    @Test
    void anRdmaWriteThroughADmabufMrLandsInGpuMemoryAndSurvivesAMoveByAPageFault() throws Exception {
        Rig r = rig();
        RcEnd[] p = r.p();
        long dptr = r.dptr();
        int fd = r.fd();
        long iova = r.iova();
        IbvMr dmr = r.dmr();
        assertEquals(16, rm.usedSlots(), "registration mapped the whole buffer into BAR1");
        long bar = iommu.barBytes();
        byte[] first = fill(p[0].buf, 8192, 4);
        p[0].qp.postSend(write(p[0], p[0].buf, 8192, iova + 4096, dmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(first, gpuBytes(dptr + 4096, 8192), "through the dma-buf MR into video memory");
        assertEquals(8192, iommu.barBytes() - bar, "across the GPU's BAR1");

        assertEquals(16, rm.dmaBufEvictBar1(proc, fd), "move_notify: the importer unmapped, the slots are free");
        assertEquals(0, rm.usedSlots());
        byte[] second = fill(p[0].buf, 4096, 9);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, iova + (512 << 10), dmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status, "the access page-faulted and the buffer was mapped again");
        assertArrayEquals(second, gpuBytes(dptr + (512 << 10), 4096));
        assertEquals(16, rm.usedSlots(), "mapped again, whole");
        assertTrue(ibs.get(1).odpStats().stream().anyMatch(l -> l.contains("dma-buf MR") && l.contains("faults 1") && l.contains("moves 1")),
                String.join("\n", ibs.get(1).odpStats()));
        assertEquals(0, iommu.audit().useAfterFree());

        dmr.dereg();
        assertEquals(0, rm.usedSlots(), "dereg unmapped the buffer");
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }

    /**
     * {@code ibv_advise_mr} on a dynamic dma-buf MR, as mlx5 does it ({@code get_prefetchable_mr}
     * finds it in {@code odp_mkeys}, {@code pagefault_dmabuf_mr} maps the whole buffer): after a
     * move emptied BAR1, a synchronous prefetch of one page maps all 16 slots again and the next
     * write lands without a page fault; the asynchronous flavour does the same in the background;
     * the ODP errors apply (EFAULT below the iova, EPERM for PREFETCH_WRITE on a read-only MR or
     * from another PD, ENOENT once deregistered).
     */
    @Test
    void adviseMrPrefetchesAWholeDmabufMrAsMlx5Does() throws Exception {
        Rig r = rig();
        RcEnd[] p = r.p();
        long dptr = r.dptr();
        int fd = r.fd();
        long iova = r.iova();
        IbvMr dmr = r.dmr();
        assertEquals(16, rm.dmaBufEvictBar1(proc, fd), "moved: every slot unmapped");
        assertEquals(0, rm.usedSlots());
        p[1].pd.adviseMr(org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_FLAG_FLUSH,
                new org.peerdirect.ib.core.verbs.IbvSge(iova + 4096, 4096, dmr.lkey()));
        assertEquals(16, rm.usedSlots(), "one page asked, the whole buffer mapped (pagefault_dmabuf_mr)");
        byte[] data = fill(p[0].buf, 8192, 3);
        p[0].qp.postSend(write(p[0], p[0].buf, 8192, iova + (256 << 10), dmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(data, gpuBytes(dptr + (256 << 10), 8192));
        String line = ibs.get(1).odpStats().stream().filter(l -> l.contains("dma-buf MR")).findFirst().orElseThrow();
        assertTrue(line.contains("faults 0") && line.contains("prefetched pages 256"), "prefetched, so the write did not fault: " + line);

        assertEquals(16, rm.dmaBufEvictBar1(proc, fd));
        p[1].pd.adviseMr(org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH, 0, new org.peerdirect.ib.core.verbs.IbvSge(iova, 1, dmr.lkey()));
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (rm.usedSlots() != 16) {
            assertTrue(System.nanoTime() < deadline, "the background prefetch mapped the buffer within 10 s");
            Thread.onSpinWait();
        }

        KernelException below = assertThrows(KernelException.class, () -> p[1].pd.adviseMr(
                org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH, org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_FLAG_FLUSH,
                new org.peerdirect.ib.core.verbs.IbvSge(iova - 4096, 4096, dmr.lkey())));
        assertEquals(KernelException.Errno.EFAULT, below.errno(), below.getMessage());
        assertTrue(below.getMessage().contains("below its iova"), below.getMessage());
        IbvMr ro = p[1].pd.regDmabufMr(0, 1 << 20, iova, fd, IbAccess.REMOTE_READ);
        KernelException roWrite = assertThrows(KernelException.class, () -> p[1].pd.adviseMr(
                org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_FLAG_FLUSH,
                new org.peerdirect.ib.core.verbs.IbvSge(iova, 4096, ro.lkey())));
        assertEquals(KernelException.Errno.EPERM, roWrite.errno(), roWrite.getMessage());
        ro.dereg();
        org.peerdirect.ib.core.verbs.IbvPd other = p[1].ctx.allocPd();
        KernelException otherPd = assertThrows(KernelException.class, () -> other.adviseMr(
                org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH, org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_FLAG_FLUSH,
                new org.peerdirect.ib.core.verbs.IbvSge(iova, 4096, dmr.lkey())));
        assertEquals(KernelException.Errno.EPERM, otherPd.errno(), otherPd.getMessage());
        other.dealloc();
        int lkey = dmr.lkey();
        dmr.dereg();
        KernelException gone = assertThrows(KernelException.class, () -> p[1].pd.adviseMr(
                org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH, org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_FLAG_FLUSH,
                new org.peerdirect.ib.core.verbs.IbvSge(iova, 4096, lkey)));
        assertEquals(KernelException.Errno.ENOENT, gone.errno(), gone.getMessage());
        assertEquals(0, rm.usedSlots(), "dereg unmapped the buffer");
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }

    @Test
    void theBufferOutlivesAFreeOfItsAllocationAndARevocationEndsInErrorCompletions() throws Exception {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long dptr = rm.cuMemAlloc(proc, 256 << 10);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 256 << 10);
        IbvMr dmr = p[1].pd.regDmabufMr(0, 256 << 10, 0, fd, RW);
        rm.cuMemFree(proc, dptr); // the buffer references the pages: the MR still works
        fill(p[0].buf, 4096, 2);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, 0, dmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status, "the dma-buf keeps the freed allocation's pages");

        assertEquals(List.of(), rm.shutdown(), "the GPU goes: its dma-bufs are revoked"); // the importer zapped and unmapped
        rmDown = true;
        assertTrue(dmr.invalidated(), "the MR reports its buffer revoked");
        assertEquals(0, rm.usedSlots());
        long uaf = iommu.audit().useAfterFree();
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, 0, dmr.rkey()));
        IbvWcStatus st = Mlx5VerbsTest.one(p[0].cq).status;
        assertNotEquals(IbvWcStatus.SUCCESS, st, "a revoked buffer cannot be mapped again: the fault resumes with an error");
        assertEquals(uaf, iommu.audit().useAfterFree(), "nothing reached the GPU after the revocation");
        dmr.dereg();
        proc.close(fd); // the last reference: the pages go
        p[0].close();
        p[1].close();
    }

    /**
     * The exporter moving the buffer while RDMA WRITEs run: each move zaps and unmaps under the
     * reservation lock while the device may be mid-transfer or mid-fault; every write must land
     * (a fault re-maps), byte for byte, and nothing may reach a BAR1 slot after it was taken back.
     */
    @Test
    void writesRacingMovesAllLandAndNothingReachesATakenBackSlot() throws Exception {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long dptr = rm.cuMemAlloc(proc, 256 << 10);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 256 << 10);
        IbvMr dmr = p[1].pd.regDmabufMr(0, 256 << 10, dptr, fd, RW);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicInteger moves = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.CountDownLatch firstMove = new java.util.concurrent.CountDownLatch(1);
        Thread mover = Thread.ofPlatform().name("exporter-move").start(() -> {
            while (!stop.get()) {
                rm.dmaBufEvictBar1(proc, fd);
                moves.incrementAndGet();
                firstMove.countDown();
                Thread.onSpinWait();
            }
        });
        try {
            assertTrue(firstMove.await(30, java.util.concurrent.TimeUnit.SECONDS), "the exporter moved the buffer");
            long deadline = System.nanoTime() + 30_000_000_000L;
            // at least 100 writes and at least 20 moves while they run, however the threads are scheduled
            for (int i = 0; i < 100 || moves.get() < 20 && System.nanoTime() < deadline; i++) {
                long at = (i % 60) * 4096L;
                byte[] sent = fill(p[0].buf, 4096, i);
                p[0].qp.postSend(write(p[0], p[0].buf, 4096, dptr + at, dmr.rkey()));
                assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status, "write " + i);
                assertArrayEquals(sent, gpuBytes(dptr + at, 4096), "write " + i + " landed");
            }
        } finally {
            stop.set(true);
            mover.join(10_000);
        }
        assertTrue(moves.get() >= 20, "the exporter moved the buffer meanwhile: " + moves.get());
        assertEquals(0, iommu.audit().useAfterFree(), "no access reached a slot after it was taken back");
        dmr.dereg();
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }

    /**
     * Review finding: an MR of an odd number of pages (3 here, and one not starting on a page
     * boundary) re-maps after a move: the UMR writes whole octowords, so the entry past the last
     * page must be given too. It failed every access after the first move.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource({"0, 12288", "100, 8192"})
    void anMrOfAnOddPageCountReMapsAfterAMove(long offset, long length) throws Exception {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long dptr = rm.cuMemAlloc(proc, 64 << 10);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 64 << 10);
        IbvMr dmr = p[1].pd.regDmabufMr(offset, length, dptr + offset, fd, RW);
        rm.dmaBufEvictBar1(proc, fd);
        byte[] sent = fill(p[0].buf, 512, 3);
        p[0].qp.postSend(write(p[0], p[0].buf, 512, dptr + offset + length - 512, dmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status, "the last page, after a move");
        assertArrayEquals(sent, gpuBytes(dptr + offset + length - 512, 512));
        dmr.dereg();
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }
}
