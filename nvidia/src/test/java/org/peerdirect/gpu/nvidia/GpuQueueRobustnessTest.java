package org.peerdirect.gpu.nvidia;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.ifc.GpuRegs;
import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.testkit.Machine;

/**
 * The resource manager over a GPU that gets bad input from elsewhere on the bus: writes to
 * undefined and read-only registers, stray doorbells and queue bases written while the queues run
 * do not disturb it (the model refuses them and records them); a GPU whose queues were switched
 * off and pointed at garbage fails the one call that met it with EIO naming the error, and the
 * driver, having set its queues up again, goes on. Every test ends with the IOMMU audit clean.
 */
class GpuQueueRobustnessTest {

    @TempDir
    Path tmp;
    Machine m;
    GpuBoard board;
    PciFunction fn;
    NvidiaRm rm;
    AddressSpace proc;

    @BeforeEach
    void up() {
        m = Machine.builder(tmp).build();
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
        fn = m.plug(board.spec());
        rm = new NvidiaRm(m.mm(), fn, 0);
        proc = m.process("app");
    }

    @AfterEach
    void down() {
        List<String> left = rm.shutdown();
        board.close();
        m.close(); // the audit
        assertEquals(List.of(), left);
    }

    /** Allocates, copies in and out (across pages), pins and unpins, copies within the GPU, frees; the bytes must be right. */
    private void work(SplittableRandom rnd) {
        int size = (1 + rnd.nextInt(4)) << 16;
        long d = rm.cuMemAlloc(proc, size);
        byte[] in = new byte[size - 100];
        rnd.nextBytes(in);
        rm.cuMemcpyHtoD(proc, d + 100, in, 0, in.length);
        NvidiaP2pPageTable t = rm.getPagesPersistent(proc.pid(), d, size);
        rm.cuMemcpyDtoD(proc, d, d + 100, 4096);
        byte[] out = new byte[in.length];
        rm.cuMemcpyDtoH(proc, out, 0, d + 100, out.length);
        byte[] head = new byte[4096];
        rm.cuMemcpyDtoH(proc, head, 0, d, 4096);
        assertArrayEquals(java.util.Arrays.copyOf(in, 4096), head, "DtoD moved the bytes inside the GPU");
        // [d, d+4096) now holds in[0, 4096): what DtoH read from d+100 starts with in[100, 4096), then the rest as written
        assertArrayEquals(java.util.Arrays.copyOfRange(in, 100, 4096), java.util.Arrays.copyOf(out, 3996), "DtoD's bytes, read back");
        assertArrayEquals(java.util.Arrays.copyOfRange(in, 3996, in.length), java.util.Arrays.copyOfRange(out, 3996, out.length),
                "HtoD then DtoH gives the bytes back");
        rm.putPagesPersistent(t);
        rm.cuMemFree(proc, d);
    }

    @Test
    void undefinedRegistersStrayDoorbellsAndBasesWrittenWhileRunningDoNotDisturbTheDriver() throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong rogueWrites = new AtomicLong();
        int undefBefore = fn.read32(GpuRegs.BAR0, GpuRegs.UNDEF_WRITES);
        Thread rogue = Thread.ofPlatform().name("rogue").start(() -> {
            SplittableRandom r = new SplittableRandom(7);
            long[] safe = {GpuRegs.CMDQ_HEAD, GpuRegs.CMDQ_BASE_LO, GpuRegs.MSGQ_BASE_HI, GpuRegs.ERR_CODE, GpuRegs.STATUS, GpuRegs.NV_PMC_BOOT_0,
                    GpuRegs.BLOCK_END + 4L * r.nextInt(64), 4L * r.nextInt(1 << 20)};
            while (!stop.get()) {
                fn.write32(GpuRegs.BAR0, safe[r.nextInt(safe.length)], r.nextInt());
                rogueWrites.incrementAndGet();
                Thread.yield();
            }
        });
        try {
            SplittableRandom rnd = new SplittableRandom(11);
            for (int i = 0; i < 60; i++) {
                work(rnd);
            }
        } finally {
            stop.set(true);
            rogue.join();
        }
        assertTrue(rogueWrites.get() > 0);
        assertTrue(fn.read32(GpuRegs.BAR0, GpuRegs.UNDEF_WRITES) > undefBefore, "the model counted the writes to undefined registers");
        assertEquals(GpuRegs.STATUS_RUNNING, fn.read32(GpuRegs.BAR0, GpuRegs.STATUS), "the queues ran throughout");
        assertEquals(0, rm.usedPages());
        assertEquals(0, rm.usedSlots());
    }

    @Test
    void queuesSwitchedOffAndPointedElsewhereFailOneCallAndTheDriverGoesOn() {
        long d = rm.cuMemAlloc(proc, 128 << 10);
        byte[] in = new byte[128 << 10];
        new SplittableRandom(3).nextBytes(in);
        rm.cuMemcpyHtoD(proc, d, in, 0, in.length);
        // someone else on the bus switches the queues off and points them at nowhere
        fn.write32(GpuRegs.BAR0, GpuRegs.CTRL, GpuRegs.CTRL_RESET);
        fn.write32(GpuRegs.BAR0, GpuRegs.CMDQ_BASE_LO, 0x1234_5000);
        fn.write32(GpuRegs.BAR0, GpuRegs.CMDQ_BASE_HI, 0x7);
        byte[] out = new byte[in.length];
        KernelException e = assertThrows(KernelException.class, () -> rm.cuMemcpyDtoH(proc, out, 0, d, out.length));
        assertEquals(KernelException.Errno.EIO, e.errno(), e.getMessage());
        assertTrue(e.getMessage().contains("doorbell while the queues are off"), e.getMessage());
        rm.cuMemcpyDtoH(proc, out, 0, d, out.length); // the driver set its queues up again
        assertArrayEquals(in, out, "the video memory kept its bytes");
        // and queues enabled over a bad base are refused by name, the driver's next setup wins
        fn.write32(GpuRegs.BAR0, GpuRegs.CTRL, GpuRegs.CTRL_RESET);
        fn.write32(GpuRegs.BAR0, GpuRegs.CMDQ_BASE_LO, 0x1234_5008);
        fn.write32(GpuRegs.BAR0, GpuRegs.CTRL, GpuRegs.CTRL_ENABLE);
        assertEquals(GpuRegs.ERR_BAD_QUEUE_ADDRESS, fn.read32(GpuRegs.BAR0, GpuRegs.ERR_CODE));
        assertEquals(0, fn.read32(GpuRegs.BAR0, GpuRegs.STATUS));
        assertThrows(KernelException.class, () -> rm.cuMemcpyDtoH(proc, out, 0, d, 4096));
        NvidiaP2pPageTable t = rm.getPagesPersistent(proc.pid(), d, 128 << 10);
        assertEquals(2, rm.usedSlots());
        rm.putPagesPersistent(t);
        rm.cuMemFree(proc, d);
        assertEquals(0, rm.usedPages());
    }

    @Test
    void theQueuesAndTheStagingBufferAreTheDriversOnlyDmaMemoryAndGoWithIt() {
        // two stores of two pages (header page + 16 elements of 256 bytes) and the 64 KiB staging buffer, as dma_alloc_coherent blocks
        int expected = 2 * 2 + 16;
        assertEquals(expected, rm.smi().dmaPages(), "what the driver holds mapped");
        assertEquals(expected, fn.dma().mappedPages(), "and all the GPU's domain maps: nothing else, nothing twice");
        long cmdq = (fn.read32(GpuRegs.BAR0, GpuRegs.CMDQ_BASE_HI) & 0xffff_ffffL) << 32 | fn.read32(GpuRegs.BAR0, GpuRegs.CMDQ_BASE_LO) & 0xffff_ffffL;
        long msgq = (fn.read32(GpuRegs.BAR0, GpuRegs.MSGQ_BASE_HI) & 0xffff_ffffL) << 32 | fn.read32(GpuRegs.BAR0, GpuRegs.MSGQ_BASE_LO) & 0xffff_ffffL;
        assertTrue(cmdq != 0 && msgq != 0 && cmdq != msgq && (cmdq & 0xfff) == 0 && (msgq & 0xfff) == 0, "page-aligned bus addresses of two stores");
        work(new SplittableRandom(5)); // copies go through the staging buffer: no mapping of their own
        assertEquals(expected, fn.dma().mappedPages(), "nothing mapped per copy");
        assertEquals(List.of(), rm.shutdown());
        assertEquals(0, rm.smi().dmaPages());
        assertEquals(0, fn.dma().mappedPages(), "unmapped when the driver let go");
    }
}
