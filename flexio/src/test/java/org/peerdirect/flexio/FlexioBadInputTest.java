package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvContext;

/**
 * Bad input to the host library: each gets FAILED (or the packer's IllegalArgumentException) with a
 * message naming the problem, leaves nothing behind, and the process keeps working.
 */
class FlexioBadInputTest {

    @TempDir
    Path tmp;
    FlexioMachine m;
    IbvContext ctx;

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

    static String failed(Runnable r) {
        FlexioException e = assertThrows(FlexioException.class, r::run);
        assertEquals(FlexioStatus.FAILED, e.status(), e.getMessage());
        return e.getMessage();
    }

    @Test
    void badCallsAreRefusedAndTheProcessKeepsWorking() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            FlexioFunc stranger = TestApps.rpc("rpc_nowhere", 1);
            assertTrue(failed(() -> p.call(stranger, 1L)).contains("has no entry point rpc_nowhere"));
            assertTrue(failed(() -> p.call(TestApps.COUNT, 1L)).contains("is a GLOBAL entry, not RPC"));
            assertTrue(failed(() -> FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(TestApps.CALCULATE, 0)))
                    .contains("is a RPC entry, not GLOBAL"));
            String eu = failed(() -> FlexioEventHandler.create(p, new FlexioEventHandler.Attr(TestApps.COUNT, false, 0, 0,
                    FlexioEventHandler.AffinityType.STRICT, 4000)));
            assertTrue(eu.contains("flexio_event_handler_create") && eu.contains("syndrome"), eu);
            assertTrue(failed(() -> FlexioMkey.deviceMkeyCreate(p, 0x10, 64)).contains("is not in the heap"));
            assertTrue(failed(() -> p.host2devMemcpy(new byte[1 << 17], p.processMemInfoGet().base())).contains("outside the heap"));
            assertThrows(IllegalArgumentException.class, () -> p.call(TestApps.CALCULATE, "seven", 35L), "the packer names the type");
            assertEquals(42, p.call(TestApps.CALCULATE, 7L, 35L), "the process still answers");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet());
        }
    }

    @Test
    void badProcessesAreRefusedAndLeaveNothing() {
        FlexioApp lying = FlexioApp.create("lying", TestApps.rpcApp().image(), List.of(TestApps.rpc("rpc_absent", 0)));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FlexioProcess.create(ctx, lying, null));
        assertTrue(e.getMessage().contains("rpc_absent"), e.getMessage());
        FlexioApp garbage = FlexioApp.create("garbage", new byte[] {1, 2, 3}, List.of());
        assertTrue(assertThrows(IllegalArgumentException.class, () -> FlexioProcess.create(ctx, garbage, null)).getMessage()
                .contains("malformed DPA image"));
        String big = failed(() -> FlexioProcess.create(ctx, TestApps.rpcApp(), new FlexioProcess.Attr(1L << 40, Duration.ofSeconds(5))));
        assertTrue(big.contains("flexio_process_create") && big.contains("syndrome"), big);
        assertEquals(0, m.bf3.devxLive() - 1, "only the context's uid: " + m.bf3.devxDescribe());
    }
}
