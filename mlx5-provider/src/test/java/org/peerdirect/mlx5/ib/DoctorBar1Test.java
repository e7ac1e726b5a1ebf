package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.rdma.tools.NvidiaBar1;
import org.peerdirect.rdma.tools.RdmaTools;

/**
 * {@code rdma:doctor} on GPU memory with BAR1 nearly full: a GPU with a 4 MiB BAR1 (64 slots of
 * 64 KiB) of which a registered MR holds 60. A 256 KiB range fits and fills BAR1 (the doctor says
 * the next pin fails); a 512 KiB range does not: nv_mem's path is NO with BAR1 exhausted named
 * (its {@code acquire} probe pin fails and it answers "not mine"), and the registration really
 * fails. The doctor itself takes no BAR1 slot.
 */
class DoctorBar1Test extends Mlx5Machine {

    static final long SLOT = NvidiaRm.P2P_PAGE_SIZE;

    @TempDir
    Path tmp;
    GpuBoard board;
    NvidiaRm rm;
    NvPeerMem nv;
    PeerMemoryRegistration reg;

    @AfterEach
    void down() throws InterruptedException {
        List<String> gpuLeft = rm.shutdown();
        List<String> left = stopMachine();
        boolean unregistered = reg.unregister(java.time.Duration.ofSeconds(10));
        board.close();
        assertTrue(unregistered, "nv_mem unregistered");
        assertEquals(List.of(), gpuLeft, "no video memory or BAR1 slot held");
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }

    private static String line(String out, String path) {
        return out.lines().filter(l -> l.trim().startsWith(path)).findFirst().orElseThrow(() -> new AssertionError(path + " in\n" + out));
    }

    @Test
    void aRangeThatDoesNotFitInTheFreeBar1SlotsIsNamedAsBar1Exhausted() {
        startMachine(tmp, "cuda-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        proc.setMemlockLimit(1L << 30);
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 16L << 20, 64 * SLOT);
        rm = new NvidiaRm(mm, bus.register(board.spec()), 0);
        nv = new NvPeerMem("nv_mem", () -> List.of(rm), false, false);
        reg = core.peerMemory().register(nv, true);
        RdmaTools t = tools();
        t.setUmemForTests(core.umems());
        t.addGpuBar1ForTests(new NvidiaBar1(() -> List.of(rm)));
        RcEnd end = new RcEnd(0);
        long held = rm.cuMemAlloc(proc, 60 * SLOT);
        IbvMr big = end.pd.regMr(held, 60 * SLOT, RW);
        long small = rm.cuMemAlloc(proc, 4 * SLOT);
        long large = rm.cuMemAlloc(proc, 8 * SLOT);
        long used = rm.smi().bar1UsedBytes();
        assertEquals(60 * SLOT, used, "the MR holds 60 of the 64 slots");

        String fits = t.doctor("-d", "mlx5_0", String.valueOf(proc.pid()), "0x" + Long.toHexString(small), "256K");
        System.out.println(fits);
        assertTrue(fits.contains("BAR1 60 of 64 slots of 64 KiB in use; the range needs 4: it fits and fills BAR1"), fits);
        assertTrue(line(fits, "peer client nv_mem").contains("YES") && line(fits, "peer client nv_mem").contains(
                "BAR1 is then full, the next pin of GPU memory fails with ENOMEM"), fits);

        String full = t.doctor("-d", "mlx5_0", String.valueOf(proc.pid()), "0x" + Long.toHexString(large), "512K");
        System.out.println(full);
        assertTrue(full.contains("the range needs 8: BAR1 space would be exhausted (4 free)"), full);
        String nvLine = line(full, "peer client nv_mem");
        assertTrue(nvLine.contains("NO") && nvLine.contains("ENOMEM: BAR1 space exhausted on NVIDIA A100-PCIE-40GB")
                && nvLine.contains("needs 8 BAR1 slots of 64 KiB, 4 of 64 are free"), full);
        assertTrue(full.contains("verdict: ibv_reg_mr(LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ) fails: EFAULT") && full.contains(
                "BAR1 space is exhausted on NVIDIA A100-PCIE-40GB (needs 8 slots of 64 KiB, 4 free)"), full);
        assertEquals(used, rm.smi().bar1UsedBytes(), "the doctor took no BAR1 slot");

        // what the doctor said is what a registration meets
        KernelException e = assertThrows(KernelException.class, () -> end.pd.regMr(large, 8 * SLOT, RW));
        assertEquals(KernelException.Errno.EFAULT, e.errno(), e.getMessage());
        IbvMr last = end.pd.regMr(small, 4 * SLOT, RW);
        assertEquals(64 * SLOT, rm.smi().bar1UsedBytes(), "the 256 KiB range filled BAR1");
        last.dereg();
        big.dereg();
        end.close();
        rm.cuMemFree(proc, held);
        rm.cuMemFree(proc, small);
        rm.cuMemFree(proc, large);
    }
}
