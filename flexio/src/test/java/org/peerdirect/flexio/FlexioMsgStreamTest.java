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

    /** {@code dpa:msg}: each stream's lines as the host received them, the last N, of one process; kept after destroy. */
    @Test
    void dpaMsgShowsTheLastLinesOfEachStreamAsReceived() {
        List<String> lines = new ArrayList<>();
        FlexioCommands cmd = new FlexioCommands();
        int pid;
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            pid = p.id();
            FlexioMsgStream s = FlexioMsgStream.create(p, new FlexioMsgStream.Attr(2048, FlexioMsgStream.SyncMode.ASYNC, "msgcmd", 3),
                    lines::add);
            assertEquals(30, p.call(TestApps.PRINT_MANY, 30L, s.daddr()));
            String before = cmd.msg(5, pid);
            assertTrue(before.contains("stream msgcmd: ASYNC level 3, 0 line(s) received"), "nothing before the flush: " + before);
            s.flush();
            List<String> shown = streamBlock(cmd.msg(5, pid), "msgcmd");
            assertTrue(shown.getFirst().contains("process " + pid + " (app flexio_rpc") && shown.getFirst().contains("30 line(s) received"),
                    shown.getFirst());
            assertEquals(List.of("  line 25", "  line 26", "  line 27", "  line 28", "  line 29"), shown.subList(1, shown.size()),
                    "the last 5, oldest first");
            assertEquals(1, streamBlock(cmd.msg(0, pid), "msgcmd").size(), "-n 0: the stream's line only");
        }
        List<String> after = streamBlock(cmd.msg(2, pid), "msgcmd");
        assertTrue(after.getFirst().endsWith(", destroyed"), after.getFirst());
        assertEquals(List.of("  line 28", "  line 29"), after.subList(1, after.size()), "kept after the process went");
        assertTrue(cmd.msg(20, 1 << 20).contains("no message stream of DPA process " + (1 << 20)));
        assertThrows(IllegalArgumentException.class, () -> FlexioMsgLog.describe(-1, -1));
    }

    /** The last block of {@code out} whose header names stream {@code name}: the header, then its lines. */
    private static List<String> streamBlock(String out, String name) {
        List<String> all = List.of(out.split("\n"));
        int at = -1;
        for (int i = 0; i < all.size(); i++) {
            if (all.get(i).contains(" stream " + name + ":")) {
                at = i;
            }
        }
        assertTrue(at >= 0, out);
        int end = at + 1;
        while (end < all.size() && all.get(end).startsWith("  ")) {
            end++;
        }
        return all.subList(at, end);
    }
}
