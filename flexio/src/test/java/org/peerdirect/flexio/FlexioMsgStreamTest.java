package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvContext;

/**
 * Message streams: the device line of FlexIO's RPC sample arrives on a SYNC stream, levels filter,
 * an ASYNC stream keeps its lines until flush and counts what a lapping device overwrote; the
 * stream's window, mkey and umem go with it (the machine's audit).
 */
class FlexioMsgStreamTest {

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

    @Test
    void theRpcSamplePrintsItsLineOnASyncStream() {
        List<String> lines = Collections.synchronizedList(new ArrayList<>());
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            FlexioMsgStream s = FlexioMsgStream.create(p, new FlexioMsgStream.Attr(2048, FlexioMsgStream.SyncMode.SYNC, "default", 4),
                    lines::add);
            assertEquals(42, p.call(TestApps.CALCULATE_PRINT, 40L, 2L, s.daddr()));
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (lines.isEmpty()) {
                assertTrue(System.nanoTime() < deadline, "the SYNC stream printed within 20 s");
                Thread.onSpinWait();
            }
            assertEquals(List.of("rpc_calculate: 40 + 2 = 42"), lines, "one line; the DEBUG one filtered at INFO");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
            s.destroy();
        }
    }

    /**
     * The mutant of {@code flexio_dev_msg}: window stores never written back. The host sees
     * nothing, and the strict memory model ends the process at the activation's end (C3), naming the
     * handler's line; the fixed library (the test above) is silent.
     */
    @Test
    void aPrintWithoutWindowWritebackIsCaughtNamingItsLine() {
        List<String> lines = new ArrayList<>();
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            FlexioMsgStream s = FlexioMsgStream.create(p, new FlexioMsgStream.Attr(2048, FlexioMsgStream.SyncMode.ASYNC, "mutant", 1),
                    lines::add);
            FlexioException e = assertThrows(FlexioException.class, () -> p.call(TestApps.PRINT_NO_WRITEBACK, s.daddr()));
            assertTrue(e.getMessage().contains("status 0x7"), e.getMessage());
            assertEquals(FlexioStatus.ERR_FATAL_ERROR, p.errStatusGet());
            s.flush();
            assertEquals(List.of(), lines, "the host never saw the unwritten-back line");
            String ps = String.join("\n", m.dpa());
            assertTrue(ps.contains("C3") && ps.contains("RpcProgs.rpcPrintNoWriteback:"), ps);
        }
    }

    @Test
    void anAsyncStreamPrintsOnFlushAndCountsAnOverrun() {
        List<String> lines = new ArrayList<>();
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            FlexioMsgStream s = FlexioMsgStream.create(p, new FlexioMsgStream.Attr(2048, FlexioMsgStream.SyncMode.ASYNC, "async", 1),
                    lines::add);
            assertEquals(3, p.call(TestApps.PRINT_MANY, 3L, s.daddr()));
            assertEquals(List.of(), lines, "nothing before the flush");
            s.flush();
            assertEquals(List.of("line 0", "line 1", "line 2"), lines);
            lines.clear();
            assertEquals(400, p.call(TestApps.PRINT_MANY, 400L, s.daddr()), "about 3 KiB into a 2 KiB ring");
            s.flush();
            assertTrue(s.overruns() > 0, "the device lapped the ring: " + s.overruns());
            assertEquals("line 399", lines.getLast(), "the newest lines survive");
            assertTrue(lines.size() < 400, lines.size() + " lines");
            // process_destroy takes the stream with it; the stream's own destroy then does nothing
        }
        assertThrows(IllegalArgumentException.class, () -> new FlexioMsgStream.Attr(1000, FlexioMsgStream.SyncMode.SYNC, "x", 1));
    }
}
