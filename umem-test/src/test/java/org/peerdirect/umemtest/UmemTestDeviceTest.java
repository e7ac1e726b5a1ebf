package org.peerdirect.umemtest;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.testkit.Machine;

/**
 * The test DMA device through the public APIs only (the umem service and the peer-memory
 * registry of a testkit machine): its DMA moves the process's bytes through the IOMMU, a peer
 * client's invalidation revokes its MR before the memory goes, and bad requests are refused by
 * name. The machine's audit at close checks that nothing stayed mapped, pinned or allocated.
 * (ib-core's own tests drive the umem and Peer-Direct code with a fixture of their own.)
 */
class UmemTestDeviceTest {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;

    @TempDir
    Path tmp;

    private static MemorySegment pattern(Arena a, int len, int seed) {
        MemorySegment s = a.allocate(len);
        for (int i = 0; i < len; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + seed));
        }
        return s;
    }

    @Test
    void aPinnedMrMovesTheProcesssBytesAndDeregReturnsThePin() {
        try (Machine m = Machine.builder(tmp).build(); Arena arena = Arena.ofConfined()) {
            UmemTestDevice dev = new UmemTestDevice("umem_test0", m.iommu(), m.umems());
            AddressSpace app = m.process("app");
            long va = app.mmap(1 << 16);
            UmemTestDevice.Mr mr = dev.reg(app, va + 100, 20_000, RW);
            assertFalse(mr.umem().isPeer());
            assertEquals(List.of(mr), dev.mrs());
            assertTrue(app.pinnedPages() > 0, "pinned and charged");

            MemorySegment out = pattern(arena, 20_000, 3);
            mr.dmaWrite(va + 100, out, 0, 20_000);
            byte[] seen = new byte[20_000];
            app.read(va + 100, seen, 0, seen.length);
            assertArrayEquals(out.toArray(ValueLayout.JAVA_BYTE), seen, "the process sees the device's write");
            MemorySegment in = arena.allocate(20_000);
            mr.dmaRead(va + 100, in, 0, 20_000);
            assertEquals(-1, out.mismatch(in), "the device reads back what it wrote");

            dev.dereg(mr);
            assertEquals(0, app.pinnedPages(), "the pin and its charge went with the MR");
            assertEquals(0, dev.iommuDomain().mappedPages());
            assertEquals(List.of(), dev.mrs());
            dev.close();
        }
    }

    @Test
    void aPeerClientsInvalidationRevokesTheMrBeforeItsMemoryGoes() {
        try (Machine m = Machine.builder(tmp).build(); Arena arena = Arena.ofConfined()) {
            UmemTestDevice dev = new UmemTestDevice("umem_test0", m.iommu(), m.umems());
            AddressSpace app = m.process("app");
            ExamplePeerMemory mem = new ExamplePeerMemory(m.mm(), "umt_mem", 4096, false);
            PeerMemoryRegistration reg = m.peerMemory().register(mem, true);
            long va = mem.alloc(app.pid(), 1 << 16);
            UmemTestDevice.Mr mr = dev.reg(app, va, 1 << 16, RW);
            assertTrue(mr.umem().isPeer());
            assertEquals("umt_mem", mr.umem().peerClientName());
            mr.dmaWrite(va, pattern(arena, 4096, 1), 0, 4096);
            assertNull(mr.revokedReason());

            mem.free(app.pid(), va); // invalidates, then frees the frames: the audit would see a live mapping

            assertEquals(1, mr.invalidations());
            assertTrue(mr.revokedReason().contains("invalidated by peer client umt_mem"), mr.revokedReason());
            UmemTestDevice.DmaRefused r = assertThrows(UmemTestDevice.DmaRefused.class,
                    () -> mr.dmaWrite(va, pattern(arena, 64, 2), 0, 64));
            assertTrue(r.getMessage().contains("revoked"), r.getMessage());
            assertEquals(0, dev.iommuDomain().mappedPages(), "unmapped inside the invalidation");
            dev.dereg(mr);
            reg.unregister();
            assertEquals(0, app.pinnedPages());
            dev.close();
        }
    }

    @Test
    void badRequestsAreRefusedByName() {
        try (Machine m = Machine.builder(tmp).build(); Arena arena = Arena.ofConfined()) {
            UmemTestDevice dev = new UmemTestDevice("umem_test0", m.iommu(), m.umems());
            AddressSpace app = m.process("app");
            long va = app.mmap(1 << 16);
            UmemTestDevice.Mr ro = dev.reg(app, va, 8192, IbAccess.REMOTE_READ);
            MemorySegment buf = pattern(arena, 64, 4);
            UmemTestDevice.DmaRefused e = assertThrows(UmemTestDevice.DmaRefused.class, () -> ro.dmaWrite(va, buf, 0, 64));
            assertTrue(e.getMessage().contains("no LOCAL_WRITE access"), e.getMessage());
            e = assertThrows(UmemTestDevice.DmaRefused.class, () -> ro.dmaRead(va + 8192 - 32, buf, 0, 64));
            assertTrue(e.getMessage().contains("outside the MR"), e.getMessage());
            IllegalArgumentException none = assertThrows(IllegalArgumentException.class, () -> dev.mr(ro.id() + 1));
            assertTrue(none.getMessage().contains("umemtest:list"), none.getMessage());
            UmemTestDevice other = new UmemTestDevice("umem_test1", m.iommu(), m.umems());
            IllegalArgumentException foreign = assertThrows(IllegalArgumentException.class, () -> other.dereg(ro));
            assertTrue(foreign.getMessage().contains("belongs to umem_test0, not umem_test1"), foreign.getMessage());
            other.close();
            dev.dereg(ro);
            assertEquals(0, app.pinnedPages());
            dev.dereg(ro); // idempotent, as ibv_dereg_mr: nothing more to release
            assertEquals(0, app.pinnedPages());
            dev.close();
            dev.close(); // idempotent, as AutoCloseable asks
        }
    }
}
