package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ifc.DpaObj;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.mlx5.dv.Mlx5dv;

/**
 * DPA_MODEL.md §4 scenario 1 (FlexIO's RPC sample) on a BlueField-3 through the real driver:
 * {@code flexio_process_create} loads an image (flexio-dev linked, so the silicon's verifier checks
 * the library too), {@code flexio_process_call} returns the device's result, the heap is allocated
 * from the host and filled by {@code host2dev_memcpy}; its mutant, a device {@code flexio_dev_error},
 * is a USER_ERROR the host sees; {@code process_destroy} leaves no DPA or DevX object, and the
 * machine's audit is clean.
 */
class FlexioRpcTest {

    @TempDir
    Path tmp;
    FlexioMachine m;
    IbvContext ctx;

    static final FlexioProcess.Attr ATTR = new FlexioProcess.Attr(64 * 1024, Duration.ofSeconds(30));

    @BeforeEach
    void up() {
        m = new FlexioMachine(tmp);
        ctx = m.open();
    }

    @AfterEach
    void down() {
        ctx.close();
        m.close();
    }

    @Test
    void anRpcReturnsTheDevicesResultAndDestroyLeavesNothing() {
        FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR);
        assertEquals(42, p.call(TestApps.CALCULATE, 7L, 35L));
        assertTrue(!p.errHandlerFdReadable(Duration.ofMillis(20)), "no error event while the process is well");
        assertEquals(-1 + (1L << 40), p.call(TestApps.CALCULATE, -1L, 1L << 40), "the same RPC thread, new arguments");
        assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet());
        assertThrows(IllegalArgumentException.class, () -> p.call(TestApps.CALCULATE, 1L), "the packer checks the count");
        assertTrue(m.dpa().stream().anyMatch(l -> l.contains("process")), "a DPA process lives: " + m.dpa());
        p.destroy();
        p.destroy(); // a second destroy does nothing
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
        FlexioException gone = assertThrows(FlexioException.class, () -> p.call(TestApps.CALCULATE, 1L, 2L));
        assertTrue(gone.getMessage().contains("destroyed"), gone.getMessage());
    }

    @Test
    void theHeapIsTheHostsToAllocateAndHost2devMemcpyFillsIt() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR)) {
            FlexioProcess.MemInfo before = p.processMemInfoGet();
            assertEquals(64 * 1024, before.size());
            ByteBuffer words = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
            long want = 0;
            for (int i = 0; i < 8; i++) {
                long w = 0x0101_0101_0101L * (i + 1) + i;
                words.putLong(w);
                want += w;
            }
            long src = p.copyFromHost(words.array());
            long dst = p.bufDevAlloc(64);
            assertNotEquals(0, src);
            assertNotEquals(0, dst);
            assertEquals(0, (src | dst) & 63, "64-byte aligned blocks");
            assertEquals(want, p.call(TestApps.COPY, src, dst), "the device read what host2dev_memcpy wrote");
            FlexioProcess.MemInfo used = p.processMemInfoGet();
            assertTrue(used.requested() >= 128 && used.allocated() >= used.requested(), used.toString());
            assertEquals(0, p.bufDevAlloc(1L << 20), "more than the heap: daddr 0");
            assertEquals(FlexioStatus.SUCCESS, p.bufDevFree(dst));
            assertEquals(FlexioStatus.FAILED, p.bufDevFree(dst), "a double free");
            FlexioException outside = assertThrows(FlexioException.class, () -> p.host2devMemcpy(new byte[8], used.base() - 64));
            assertEquals(FlexioStatus.FAILED, outside.status());
        }
    }

    @Test
    void aDeviceErrorIsAUserErrorTheHostSees() {
        FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR);
        assertEquals(3, p.call(TestApps.CALCULATE, 1L, 2L));
        // the user's own DevX event channel on the process (mlx5dv level), beside flexio's error fd
        Mlx5dv.DevxEventChannel ch = Mlx5dv.devxCreateEventChannel(ctx);
        Mlx5dv.devxSubscribeDevxEvent(ch, p.process, new int[] {Eq.EVENT_OBJECT_CHANGE}, 0x90_0001L);
        FlexioException e = assertThrows(FlexioException.class, () -> p.call(TestApps.FAIL, 0x90L));
        assertEquals(new Mlx5dv.DevxEvent(0x90_0001L, Eq.EVENT_OBJECT_CHANGE, DpaObj.OBJ_DPA_PROCESS, p.id()),
                Mlx5dv.devxGetEvent(ch, Duration.ofSeconds(10)), "flexio_dev_error: OBJECT_CHANGE of the process, its id");
        Mlx5dv.devxDestroyEventChannel(ch);
        assertEquals(FlexioStatus.FAILED, e.status());
        assertTrue(e.getMessage().contains("status 0x90"), e.getMessage());
        assertEquals(FlexioStatus.ERR_USER_ERROR, p.errStatusGet());
        assertEquals(0x90, p.processStatus());
        assertTrue(p.errHandlerFdReadable(Duration.ofSeconds(10)), "the error fd became readable (the process's error event)");
        assertTrue(p.crashData().contains("0x90"), p.crashData());
        FlexioException after = assertThrows(FlexioException.class, () -> p.call(TestApps.CALCULATE, 1L, 2L));
        assertTrue(after.getMessage().contains("0x90"), "the ended process answers no call: " + after.getMessage());
        p.destroy();
    }

    @Test
    void anImageTheVerifierRefusesNamesItsRuleAndLeavesNothing() {
        FlexioException e = assertThrows(FlexioException.class, () -> FlexioProcess.create(ctx, TestApps.badApp(), ATTR));
        assertEquals(FlexioStatus.FAILED, e.status());
        assertTrue(e.getMessage().contains("syndrome (0xbad0302)") && e.getMessage().contains("refused the image"), e.getMessage());
        String why = m.bf3.lastRefusal(); // the firmware's own record of the refusal (the bench's mlx5:cmdlog)
        assertTrue(why.contains("rule system") && why.contains("BadProgs.rpcClock"), why);
        assertEquals(0, m.bf3.devxLive() - 1, "only the context's uid: " + m.bf3.devxDescribe());
    }

    @Test
    void anEventHandlerRunsOnEachActivation() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR)) {
            long counter = p.copyFromHost(new byte[16]);
            FlexioEventHandler h = FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(TestApps.COUNT, counter));
            h.run();
            for (int i = 1; i <= 5; i++) {
                assertEquals(0, p.call(TestApps.ACTIVATE, (long) h.id()), "flexio_dev_event_handler_activate");
                awaitCount(p, counter, i);
            }
            assertEquals(5, h.activations());
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
        }
    }

    /**
     * {@code flexio_window_create} on the process's PD, a host mkey of that PD, and the device's
     * {@code flexio_dev_window_copy_to_host}: the bytes land in the host buffer (through the mkey and
     * the IOMMU); a window configured with a destroyed mkey fails.
     */
    @Test
    void windowCopyToHostReachesHostMemory() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR)) {
            byte[] pattern = new byte[100];
            for (int i = 0; i < pattern.length; i++) {
                pattern[i] = (byte) (i * 7 + 1);
            }
            long src = p.copyFromHost(pattern);
            long host = m.proc.mmap(4096);
            m.proc.populate(host, 4096, true);
            FlexioMkey mr = FlexioMkey.hostMkeyCreate(p, host, 4096);
            FlexioWindow w = FlexioWindow.create(p, p.pdn());
            assertEquals(0, p.call(TestApps.TO_HOST, (long) w.id(), (long) mr.id(), host + 8, src, (long) pattern.length));
            byte[] back = new byte[pattern.length];
            m.proc.read(host + 8, back, 0, back.length);
            assertEquals(java.util.Arrays.toString(pattern), java.util.Arrays.toString(back));
            int key = mr.id();
            mr.destroy();
            assertEquals(0x101, p.call(TestApps.TO_HOST, (long) w.id(), (long) key, host, src, 8L), "window_config with a destroyed mkey fails, errno set");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
            w.destroy();
            m.proc.munmap(host, 4096);
        }
    }

    /** {@code flexio_process_destroy} while a handler spins on an EU: the EU is stopped first, then everything goes. */
    @Test
    void destroyStopsAHandlerThatSpins() {
        FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR);
        long word = p.copyFromHost(new byte[16]);
        FlexioEventHandler h = FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(TestApps.SPIN, word));
        h.run();
        assertEquals(0, p.call(TestApps.ACTIVATE, (long) h.id()));
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (p.call(TestApps.READ, word) < 10) {
            assertTrue(System.nanoTime() < deadline, "the handler spins");
        }
        p.destroy();
        h.destroy(); // after its process: nothing
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
    }

    /** The handler runs after the activating RPC returned: poll its counter (bounded). */
    static void awaitCount(FlexioProcess p, long counter, long want) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        long v;
        while ((v = p.call(TestApps.READ, counter)) != want) {
            assertTrue(v < want && System.nanoTime() < deadline, "counter " + v + ", want " + want);
        }
    }
}
