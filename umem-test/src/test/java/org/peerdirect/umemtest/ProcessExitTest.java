package org.peerdirect.umemtest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.testkit.Machine;

/** A killed process leaves nothing reachable through the test DMA device (it used to: "DMA ok"). */
class ProcessExitTest {

    @TempDir
    Path tmp;

    @Test
    void exitDeregistersTheProcessesMrsBeforeItReturns() {
        try (Machine m = Machine.builder(tmp).build(); Arena arena = Arena.ofConfined()) {
            UmemTestDevice dev = new UmemTestDevice("umem_test0", m.iommu(), m.umems());
            AddressSpace victim = m.process("victim");
            long va = victim.mmap(4096);
            victim.populate(va, 4096, true);
            UmemTestDevice.Mr mr = dev.reg(victim, va, 4096, IbAccess.LOCAL_WRITE);
            assertEquals(1, victim.pinnedPages());

            victim.exit(); // kernel:kill

            assertEquals(0, dev.mrs().size(), "the MR went with the process");
            assertEquals(0, victim.pinnedPages(), "its pin is released");
            assertTrue(mr.revokedReason() != null, "revoked");
            MemorySegment buf = arena.allocate(4096);
            assertThrows(UmemTestDevice.DmaRefused.class, () -> mr.dmaWrite(va, buf, 0, 4096), "no DMA into a dead process");
            assertEquals(0, dev.iommuDomain().mappedPages());
            dev.close();
        }
    }
}
