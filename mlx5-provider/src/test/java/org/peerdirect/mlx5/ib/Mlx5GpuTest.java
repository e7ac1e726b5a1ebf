package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.gpu.peermem.NvPeerMem;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.rdma.RcConnect;

/**
 * GPUDirect RDMA on mlx5: a GPU model on the same PCI bus as two ConnectX-4 models, nv_mem
 * registered with the IB core, an application that cudaMallocs and registers GPU memory. Every
 * byte the HCA moves into the GPU crosses BAR1 through the HCA's IOMMU domain; every test ends
 * with the IOMMU audit clean, no video memory or BAR1 slot held and no module reference left.
 */
class Mlx5GpuTest extends Mlx5Machine {


    @TempDir
    Path tmp;
    GpuBoard board;
    NvidiaRm rm;
    NvPeerMem nv;
    PeerMemoryRegistration reg;

    /** Two HCAs, a GPU with {@code vram} of video memory and a {@code bar1} aperture, and the nv_mem flavour asked for. */
    void up(long vram, long bar1, boolean persistent, boolean unmaps) {
        startMachine(tmp, "cuda-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        proc.setMemlockLimit(4L << 30); // peer MRs count against RLIMIT_MEMLOCK as pinned memory does
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", vram, bar1);
        rm = new NvidiaRm(mm, bus.register(board.spec()), 0);
        nv = new NvPeerMem("nv_mem", () -> List.of(rm), persistent, unmaps);
        reg = core.peerMemory().register(nv, !persistent);
    }

    @AfterEach
    void down() {
        if (rm == null) {
            return;
        }
        // the machine first: disassociation deregisters whatever a failed test left, so the
        // client's unregister (which waits for its registrations, as the kernel's) cannot hang
        List<String> gpuLeft = rm.shutdown();
        List<String> left = stopMachine();
        boolean unregistered;
        try {
            unregistered = reg.unregister(java.time.Duration.ofSeconds(10));
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
        board.close();
        assertTrue(unregistered, "nv_mem unregistered: no registration holds it");
        assertEquals(List.of(), gpuLeft, "no video memory or BAR1 slot held");
        assertEquals(0, nv.inUse(), "no module reference left");
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }


    byte[] gpuBytes(long dptr, int n) {
        byte[] b = new byte[n];
        rm.cuMemcpyDtoH(proc, b, 0, dptr, n);
        return b;
    }

    @Test
    void anRdmaWriteLandsInGpuMemoryThroughBar1AndAReadComesBack() {
        up(64L << 20, 32L << 20, true, false);
        RcEnd[] p = pair();
        long dptr = rm.cuMemAlloc(proc, 1 << 20);
        assertThrows(org.peerdirect.kernel.mm.SegmentationFault.class, () -> proc.read(dptr, new byte[1], 0, 1),
                "an x86 CPU cannot touch cudaMalloc memory");
        IbvMr gmr = p[1].pd.regMr(dptr, 1 << 20, RW);
        assertTrue(gmr.isPeer(), "pin_user_pages refused the device mapping; nv_mem claimed it");
        long bar = iommu.barBytes();
        byte[] sent = fill(p[0].buf, 64 << 10, 3);
        p[0].qp.postSend(write(p[0], p[0].buf, 64 << 10, dptr + 4096, gmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(sent, gpuBytes(dptr + 4096, 64 << 10), "the bytes are in video memory");
        assertEquals(64 << 10, iommu.barBytes() - bar, "every byte crossed the GPU's BAR1 in the HCA's IOMMU domain");

        byte[] fromGpu = new byte[8192];
        for (int i = 0; i < fromGpu.length; i++) {
            fromGpu[i] = (byte) (i * 13 + 1);
        }
        rm.cuMemcpyHtoD(proc, dptr + (512 << 10), fromGpu, 0, fromGpu.length);
        IbvSendWr r = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, p[0].buf, 8192, p[0].mr.lkey(), 2);
        r.remoteAddr = dptr + (512 << 10);
        r.rkey = gmr.rkey();
        p[0].qp.postSend(r);
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(fromGpu, read(p[0].buf, 8192), "an RDMA READ takes video memory back out");
        assertEquals(1, nv.inUse(), "one registration of the client");
        assertEquals(1, nv.module().refcount(), "holding one module reference");
        assertFalse(nv.module().tryStop(), "rmmod nvidia_peermem: EBUSY while the MR lives");
        gmr.dereg();
        assertEquals(0, nv.module().refcount(), "the dereg dropped it");
        assertEquals(0, rm.usedSlots(), "dereg put the BAR1 pages back");
        assertTrue(nv.module().tryStop(), "rmmod passes once unused");
        KernelException e = assertThrows(KernelException.class, () -> p[1].pd.regMr(dptr, 64 << 10, RW),
                "a module being removed claims nothing: GPU memory is a device mapping nothing else pins");
        assertEquals(KernelException.Errno.EFAULT, e.errno(), e.getMessage());
        assertEquals(0, nv.inUse());
        nv.module().stopFailed(); // the unload did not happen: LIVE again, and the client claims again
        IbvMr again = p[1].pd.regMr(dptr, 64 << 10, RW);
        assertEquals(1, nv.module().refcount());
        again.dereg();
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }

    /**
     * The invalidating client: cudaFree of a registered buffer → the RM's free callback → IB
     * invalidate → mlx5 revokes the mkey by UMR → later writes complete with errors and none
     * lands; the RM unmaps BAR1 and frees the pages; the dereg only cleans up.
     */
    @Test
    void aCudaFreeOfARegisteredBufferEndsInErrorCompletionsNeverInAStrayWrite() {
        up(64L << 20, 32L << 20, false, true);
        RcEnd[] p = pair();
        long dptr = rm.cuMemAlloc(proc, 256 << 10);
        IbvMr gmr = p[1].pd.regMr(dptr, 256 << 10, RW);
        fill(p[0].buf, 4096, 9);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, dptr, gmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        long umrs = models.get(1).umrsExecuted();
        rm.cuMemFree(proc, dptr);
        assertTrue(gmr.invalidated(), "the free callback invalidated the MR");
        assertEquals(umrs + 1, models.get(1).umrsExecuted(), "revoked by one UMR before the callback returned");
        assertEquals(0, rm.usedPages(), "the RM freed the video memory after the callback");
        assertEquals(0, rm.usedSlots(), "and unmapped BAR1");
        assertEquals(1, rm.smi().freeCallbacks());
        for (int i = 0; i < 3; i++) {
            p[0].qp.postSend(write(p[0], p[0].buf, 4096, dptr + i * 4096, gmr.rkey()));
            assertEquals(IbvWcStatus.REM_ACCESS_ERR, Mlx5VerbsTest.one(p[0].cq).status, "the revoked key admits nothing");
            connect(p);
        }
        assertEquals(0, iommu.audit().useAfterFree(), "no access reached the freed pages");
        gmr.dereg();
        assertEquals(0, nv.inUse());
        p[0].close();
        p[1].close();
    }

    /**
     * The persistent client (the default nv_mem): no callback; the free succeeds and the pages stay
     * referenced and reachable until the dereg puts them, as nv-p2p's persistent API documents.
     */
    @Test
    void aPersistentRegistrationKeepsItsPagesPastTheFreeUntilDereg() {
        up(64L << 20, 32L << 20, true, false);
        RcEnd[] p = pair();
        long dptr = rm.cuMemAlloc(proc, 128 << 10);
        IbvMr gmr = p[1].pd.regMr(dptr, 128 << 10, RW);
        rm.cuMemFree(proc, dptr);
        assertFalse(gmr.invalidated(), "nothing to invalidate with");
        assertEquals(2, rm.usedPages(), "the two 64 KiB pages stay, orphaned");
        assertEquals(128 << 10, rm.smi().orphanBytes());
        fill(p[0].buf, 4096, 1);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, dptr, gmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status, "the mapping persists until dereg");
        gmr.dereg();
        assertEquals(0, rm.usedPages(), "put_pages_persistent freed the orphans");
        assertEquals(0, rm.usedSlots());
        p[0].close();
        p[1].close();
    }

    /**
     * Mellanox/nv_peer_memory#27: registrations above 128 MiB work (256 MiB, and 1 GiB, whose MTT
     * of 262 144 entries is more than one CREATE_MKEY carries: the mkey is created empty and its
     * translation loaded by UMR), written at both ends.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(longs = {256L << 20, 1L << 30})
    void aRegistrationAbove128MiBWorksEndToEnd(long size) {
        up(1L << 30, 1L << 30, true, false);
        RcEnd[] p = pair();
        long dptr = rm.cuMemAlloc(proc, size);
        IbvMr gmr = p[1].pd.regMr(dptr, size, RW);
        for (long at : new long[] {0, size - 4096, 129L << 20}) {
            byte[] sent = fill(p[0].buf, 4096, (int) (at >> 12));
            p[0].qp.postSend(write(p[0], p[0].buf, 4096, dptr + at, gmr.rkey()));
            assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
            assertArrayEquals(sent, gpuBytes(dptr + at, 4096), "at offset " + at);
        }
        assertTrue(rm.modelledPinNanos() >= NvidiaRm.PIN_BASE_NS + 4096 * NvidiaRm.PIN_PAGE_NS, "the pin's modelled cost is reported");
        assertTrue(board.committedBytes() <= 8L << 20, "video memory is committed only where touched: " + board.committedBytes());
        gmr.dereg();
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }

    /** More than the BAR1 aperture cannot be pinned: the registration fails cleanly and holds nothing. */
    @Test
    void pinningMoreThanTheBar1ApertureFailsCleanly() {
        up(64L << 20, 1L << 20, true, false);
        RcEnd[] p = pair();
        long dptr = rm.cuMemAlloc(proc, 2 << 20);
        KernelException e = assertThrows(KernelException.class, () -> p[1].pd.regMr(dptr, 2 << 20, RW));
        assertEquals(KernelException.Errno.EFAULT, e.errno(), "no client claimed it (nv_mem's probe failed): the pin error stands: " + e.getMessage());
        KernelException direct = assertThrows(KernelException.class, () -> rm.getPagesPersistent(proc.pid(), dptr, 2 << 20));
        assertEquals(KernelException.Errno.ENOMEM, direct.errno());
        assertTrue(direct.getMessage().contains("BAR1 aperture"), direct.getMessage());
        assertEquals(0, rm.usedSlots());
        assertEquals(0, nv.inUse());
        IbvMr fits = p[1].pd.regMr(dptr, 1 << 20, RW);
        assertEquals(16, rm.usedSlots(), "1 MiB fits: 16 slots of 64 KiB");
        fits.dereg();
        rm.cuMemFree(proc, dptr);
        p[0].close();
        p[1].close();
    }

    /**
     * The race classes of nv_peer_memory, with the invalidating client: a cudaFree racing the
     * dereg of the same buffer (invalidation concurrent with dma_unmap/put_pages, #53, #15, the
     * R515-R535 race), and a cudaFree racing the registration (open-gpu-kernel-modules#557; the
     * free callback meeting the core's fence, #92's lock inversion). Each round must finish in
     * bounded time with nothing held; registrations that win are revoked or deregistered cleanly.
     */
    @Test
    void freeRacingDeregAndRegistrationNeverHangsLeaksOrStrays() throws Exception {
        for (boolean unmaps : new boolean[] {true, false}) {
            up(64L << 20, 32L << 20, false, unmaps);
            RcEnd[] p = pair();
            for (int i = 0; i < 40; i++) {
                long dptr = rm.cuMemAlloc(proc, 256 << 10);
                boolean regFirst = i % 2 == 0;
                IbvMr pre = regFirst ? p[1].pd.regMr(dptr, 256 << 10, RW) : null;
                CountDownLatch go = new CountDownLatch(1);
                AtomicReference<Throwable> failed = new AtomicReference<>();
                AtomicReference<IbvMr> raced = new AtomicReference<>();
                Thread t = Thread.ofPlatform().name("racer").start(() -> {
                    try {
                        go.await();
                        if (regFirst) {
                            pre.dereg(); // must never fail, whatever the free does meanwhile
                        } else {
                            try {
                                raced.set(p[1].pd.regMr(dptr, 256 << 10, RW));
                            } catch (KernelException lostTheRace) {
                                // the registration met a freed range: a clean error is the right outcome
                            }
                        }
                    } catch (Throwable e) {
                        failed.set(e);
                    }
                });
                go.countDown();
                rm.cuMemFree(proc, dptr);
                t.join(20_000);
                assertFalse(t.isAlive(), "round " + i + " (unmaps=" + unmaps + "): no deadlock");
                if (failed.get() != null) {
                    throw new AssertionError("round " + i, failed.get());
                }
                IbvMr won = raced.get();
                if (won != null) {
                    p[0].qp.postSend(write(p[0], p[0].buf, 64, dptr, won.rkey()));
                    IbvWcStatus st = Mlx5VerbsTest.one(p[0].cq).status;
                    assertEquals(IbvWcStatus.REM_ACCESS_ERR, st, "round " + i + ": a registration that outlived the free is revoked");
                    won.dereg();
                    connect(p);
                }
                assertEquals(0, rm.usedPages(), "round " + i + ": video memory freed");
                assertEquals(0, rm.usedSlots(), "round " + i + ": BAR1 empty");
                assertEquals(0, nv.inUse(), "round " + i + ": no registration holds the client");
            }
            assertEquals(0, iommu.audit().useAfterFree());
            p[0].close();
            p[1].close();
            down();
            rm = null;
            models.clear();
            fns.clear();
            cores.clear();
            ibs.clear();
            devs.clear();
        }
    }
}
