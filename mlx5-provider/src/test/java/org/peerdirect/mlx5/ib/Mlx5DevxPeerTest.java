package org.peerdirect.mlx5.ib;

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
import org.peerdirect.gpu.peermem.NvPeerMem;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.PeerClaim;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * DevX umems over GPU memory ({@code mlx5dv_devx_umem_reg} of a {@code cudaMalloc} range) on a
 * BlueField-3 with nv_mem: MLNX_OFED's {@code devx_umem_get} takes the range with
 * {@code ib_umem_get_peer(..., 0)}, peer memory allowed but without {@code IB_PEER_MEM_INVAL_SUPP},
 * because nothing could revoke what the user built over a DevX umem. So the invalidating nv_mem is
 * skipped (the range fails with the pin's EFAULT, while {@code ibv_reg_mr} of the same range takes
 * it), and the persistent nv_mem supplies the pages: a CQ's ring lives in them, a {@code cudaFree}
 * leaves them mapped (no callback), the dereg gives them back. Also {@code mlx5dv_init_obj}'s PD
 * number. Every test ends with no DevX object, no video memory or BAR1 slot held, nv_mem unused and
 * the IOMMU clean.
 */
class Mlx5DevxPeerTest extends Mlx5Machine {

    @TempDir
    Path tmp;
    GpuBoard board;
    NvidiaRm rm;
    NvPeerMem nv;
    PeerMemoryRegistration reg;

    void up(boolean persistent) {
        startMachine(tmp, "devx-gpu", ConnectX4Device.DEVICE_BLUEFIELD3, ConnectX4Device.DEVICE_CONNECTX4);
        proc.setMemlockLimit(1L << 30);
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
        rm = new NvidiaRm(mm, bus.register(board.spec()), 0);
        nv = new NvPeerMem("nv_mem", () -> List.of(rm), persistent, !persistent);
        reg = core.peerMemory().register(nv, !persistent);
    }

    @AfterEach
    void down() throws InterruptedException {
        if (rm == null) {
            return;
        }
        assertEquals(0, models.get(0).devxLive(), "no DevX object left: " + models.get(0).devxDescribe());
        List<String> gpuLeft = rm.shutdown();
        List<String> left = stopMachine();
        boolean unregistered = reg.unregister(java.time.Duration.ofSeconds(10));
        board.close();
        assertTrue(unregistered, "nv_mem unregistered: no registration holds it");
        assertEquals(List.of(), gpuLeft, "no video memory or BAR1 slot held");
        assertEquals(0, nv.inUse(), "no module reference left");
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }

    @Test
    void anInvalidatingPeerClientIsSkippedForADevxUmemAsTheKernelSkipsIt() {
        up(false);
        IbvContext a = devs.get(0).open(proc);
        long dptr = rm.cuMemAlloc(proc, 256 << 10);
        KernelException e = assertThrows(KernelException.class, () -> Mlx5dv.devxUmemReg(a, dptr, 64 << 10, IbAccess.LOCAL_WRITE));
        assertEquals(KernelException.Errno.EFAULT, e.errno(), "the pin's error: no client that needs no invalidation claimed it: " + e.getMessage());
        assertEquals(0, nv.inUse(), "nothing of nv_mem kept");
        // the reason, as rdma:doctor asks it: nv_mem needs invalidation, the DevX caller cannot take it
        List<PeerClaim> claims = core.umems().peerClaims(proc, dptr, 64 << 10, UmemService.IB_PEER_MEM_ALLOW);
        assertEquals(PeerClaim.Answer.SKIPPED, claims.get(0).answer(), claims.toString());
        // the verbs MR of the same range supports invalidation and takes it
        IbvPd pd = a.allocPd();
        IbvMr mr = pd.regMr(dptr, 64 << 10, IbAccess.LOCAL_WRITE);
        assertTrue(mr.isPeer());
        mr.dereg();
        pd.dealloc();
        rm.cuMemFree(proc, dptr);
        a.close();
    }

    @Test
    void aPersistentPeerClientBacksADevxUmemUntilItsDereg() {
        up(true);
        IbvContext a = devs.get(0).open(proc);
        long dptr = rm.cuMemAlloc(proc, 256 << 10);
        int slots = rm.usedSlots();
        Mlx5dv.DevxUmem umem = Mlx5dv.devxUmemReg(a, dptr, 8192, IbAccess.LOCAL_WRITE);
        assertEquals(1, nv.inUse(), "nv_mem supplies the umem's pages");
        assertTrue(rm.usedSlots() > slots, "mapped through BAR1 for the HCA");
        // a CQ whose ring and doorbell record are in GPU memory: the firmware takes the peer umem like any other
        Mlx5dv.DevxUar uar = Mlx5dv.devxAllocUar(a);
        Mlx5dv.DevxObj cq = Mlx5dv.devxObjCreate(a, Mlx5DevxTest.createCq(Mlx5dv.devxQueryEqn(a, 0), uar.page(), umem.umemId(), 6), 16);
        assertTrue(models.get(0).devxDescribe().contains("umems 1"), models.get(0).devxDescribe());
        // cudaFree: a persistent registration has no callback; the pages stay the umem's until its dereg
        rm.cuMemFree(proc, dptr);
        assertEquals(1, nv.inUse(), "still held by the umem");
        assertNotEquals(0, rm.usedPages(), "the video memory stays referenced until the dereg");
        assertThrows(KernelException.class, () -> Mlx5dv.devxUmemDereg(umem), "the CQ uses it");
        Mlx5dv.devxObjDestroy(cq);
        Mlx5dv.devxUmemDereg(umem);
        assertEquals(0, nv.inUse(), "the dereg put the pages");
        assertEquals(0, rm.usedPages(), "and the RM freed them");
        Mlx5dv.devxFreeUar(uar);
        a.close();
    }

    /**
     * {@code mlx5dv_devx_umem_reg_ex} with {@code MLX5DV_UMEM_MASK_DMABUF}: a DevX umem over a dma-buf
     * of GPU memory ({@code cuMemGetHandleForAddressRange}), imported pinned
     * ({@code ib_umem_dmabuf_get_pinned}): a CQ's ring lives in it, nv_mem is not involved. Bad input:
     * an unknown {@code comp_mask} bit (EOPNOTSUPP, libmlx5), a page-size bitmap without 4 KiB
     * (EINVAL), an fd that is no dma-buf (EBADF), a range past the buffer (EINVAL).
     */
    @Test
    void aDevxUmemOverAGpuDmabufIsImportedPinned() throws Exception {
        up(false);
        IbvContext a = devs.get(0).open(proc);
        long dptr = rm.cuMemAlloc(proc, 1 << 20);
        int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 1 << 20);
        long sizes = -4096L; // every page size from 4 KiB, as mlx5dv_devx_umem_reg passes
        long dmabuf = Mlx5dv.UMEM_MASK_DMABUF;
        assertEquals(KernelException.Errno.EOPNOTSUPP, assertThrows(KernelException.class, () -> Mlx5dv.devxUmemRegEx(a,
                new Mlx5dv.DevxUmemIn(0, 8192, IbAccess.LOCAL_WRITE, sizes, dmabuf | 2, fd))).errno());
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> Mlx5dv.devxUmemRegEx(a,
                new Mlx5dv.DevxUmemIn(0, 8192, IbAccess.LOCAL_WRITE, 1L << 21, dmabuf, fd))).errno());
        assertEquals(KernelException.Errno.EBADF, assertThrows(KernelException.class, () -> Mlx5dv.devxUmemRegEx(a,
                new Mlx5dv.DevxUmemIn(0, 8192, IbAccess.LOCAL_WRITE, sizes, dmabuf, fd + 1000))).errno());
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> Mlx5dv.devxUmemRegEx(a,
                new Mlx5dv.DevxUmemIn((1 << 20) - 4096, 8192, IbAccess.LOCAL_WRITE, sizes, dmabuf, fd))).errno());
        Mlx5dv.DevxUmem umem = Mlx5dv.devxUmemRegEx(a, new Mlx5dv.DevxUmemIn(64 << 10, 8192, IbAccess.LOCAL_WRITE, sizes, dmabuf, fd));
        assertEquals(0, nv.inUse(), "a dma-buf import, no peer client");
        Mlx5dv.DevxUar uar = Mlx5dv.devxAllocUar(a);
        Mlx5dv.DevxObj cq = Mlx5dv.devxObjCreate(a, Mlx5DevxTest.createCq(Mlx5dv.devxQueryEqn(a, 0), uar.page(), umem.umemId(), 6), 16);
        assertTrue(models.get(0).devxDescribe().contains("umems 1"), models.get(0).devxDescribe());
        Mlx5dv.devxObjDestroy(cq);
        Mlx5dv.devxUmemDereg(umem);
        Mlx5dv.devxFreeUar(uar);
        // without the mask the same call is mlx5dv_devx_umem_reg's: host memory
        long va = proc.mmap(8192);
        proc.populate(va, 8192, true);
        Mlx5dv.devxUmemDereg(Mlx5dv.devxUmemRegEx(a, new Mlx5dv.DevxUmemIn(va, 8192, IbAccess.LOCAL_WRITE, sizes, 0, -1)));
        proc.munmap(va, 8192);
        proc.close(fd);
        rm.cuMemFree(proc, dptr);
        a.close();
    }

    /**
     * {@code mlx5dv_init_obj(MLX5DV_OBJ_PD)}: a verbs PD's number, what a DevX command names (the two
     * PDs of a context differ); another context's PD is not found (ENOENT), as a handle the file does
     * not hold; a deallocated PD likewise.
     */
    @Test
    void initObjPdGivesTheVerbsPdsNumberOfItsOwnContextOnly() {
        up(true);
        IbvContext a = devs.get(0).open(proc);
        IbvContext b = devs.get(0).open(proc);
        IbvPd p1 = a.allocPd();
        IbvPd p2 = a.allocPd();
        IbvPd other = b.allocPd();
        assertNotEquals(Mlx5dv.initObjPd(p1), Mlx5dv.initObjPd(p2));
        assertTrue(Mlx5dv.initObjPd(p1) > 0);
        assertEquals(KernelException.Errno.ENOENT, assertThrows(KernelException.class, () -> a.driverMethod("DV_OBJ_PD", other)).errno());
        p2.dealloc();
        assertEquals(KernelException.Errno.ENOENT, assertThrows(KernelException.class, () -> Mlx5dv.initObjPd(p2)).errno());
        IbvContext cx4 = devs.get(1).open(proc);
        IbvPd pd4 = cx4.allocPd();
        assertTrue(Mlx5dv.initObjPd(pd4) > 0, "a PD number on a device without DevX too");
        pd4.dealloc();
        cx4.close();
        other.dealloc();
        p1.dealloc();
        a.close();
        b.close();
    }
}
