package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.dpa.progs.AsyncProgs.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.progs.AsyncProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * DOCA DPA device trace: {@code doca_dpa_dev_trace} records reach the file of
 * {@code doca_dpa_trace_file_set_path} in the order traced, one line each (format ours); a full
 * buffer is sent without a flush, a partial one only with {@code doca_dpa_dev_trace_flush}; past
 * the buffer's capacity records are dropped and counted; two threads tracing at once lose nothing.
 * Each test stops the context itself (the trace's end of run) and ends with nothing left.
 */
class DocaDpaTraceTest {

    private static final Duration BOUND = Duration.ofSeconds(60);

    @TempDir
    Path tmp;
    private DpaLab lab;
    private DocaDev dev;
    private DocaDpa dpa;
    private Path file;

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp);
        dev = lab.open(0);
        dpa = DocaDpa.create(dev);
        dpa.setApp(AsyncProgsStubs.APP);
        file = tmp.resolve("dpa.trace");
        dpa.traceFileSetPath(file.toString());
    }

    @AfterEach
    void down() {
        dpa.destroy();
        assertEquals(List.of(), lab.dpa().stream().filter(l -> !l.startsWith("eu")).toList(), "no DPA process left");
        dev.close();
        lab.close();
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    /**
     * Starts the context, runs one tracer thread per {@code {n, flush, tag}}, waits for all of
     * them, takes everything down and stops the context; returns the trace file's lines.
     */
    private List<String> trace(long[]... tracers) throws IOException {
        dpa.start();
        List<Runnable> undo = new ArrayList<>();
        DocaSyncEvent done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationDpa(dpa);
        done.start();
        undo.add(done::destroy);
        List<Long> notifications = new ArrayList<>();
        for (long[] t : tracers) {
            long arg = dpa.memAlloc(T_SIZE);
            undo.add(() -> dpa.memFree(arg));
            dpa.h2dMemcpy(arg, le(t[0], t[1], done.getDpaHandle(dpa), t[2]));
            DocaDpaThread th = DocaDpaThread.create(dpa);
            undo.add(th::destroy);
            th.setFuncArg(AsyncProgsStubs.TRACER, arg);
            th.start();
            DocaDpaNotificationCompletion n = DocaDpaNotificationCompletion.create(dpa, th);
            undo.add(n::destroy);
            n.start();
            th.run();
            notifications.add(n.getDpaHandle());
        }
        for (long h : notifications) {
            dpa.rpc(AsyncProgsStubs.NOTIFY, h);
        }
        done.waitGt(tracers.length - 1, -1L, BOUND);
        for (int i = undo.size() - 1; i >= 0; i--) {
            undo.get(i).run();
        }
        dpa.stop();
        return Files.exists(file) ? Files.readAllLines(file) : List.of();
    }

    private static String line(long tag, long i) {
        return String.format("0x%016x 0x%016x 0x%016x 0x%016x 0x%016x", tag + i, i + 1, i + 2, i + 3, i + 4);
    }

    @Test
    void flushedRecordsReachTheFileInOrderOneLineEach() throws IOException {
        List<String> lines = trace(new long[] {100, 1, 0});
        List<String> want = new ArrayList<>();
        for (long i = 0; i < 100; i++) {
            want.add(line(0, i));
        }
        assertEquals(want, lines);
        assertEquals(0, dpa.traceDropped());
    }

    /** Without the flush only the full buffer (64 records) is sent; the file says how many were not. */
    @Test
    void withoutAFlushOnlyFullBuffersAreSent() throws IOException {
        List<String> lines = trace(new long[] {100, 0, 0});
        assertEquals(DocaDpaTrace.BUFFER_RECORDS + 1, lines.size(), "one full buffer, then the counts line: " + lines);
        for (int i = 0; i < DocaDpaTrace.BUFFER_RECORDS; i++) {
            assertEquals(line(0, i), lines.get(i));
        }
        assertTrue(lines.get(lines.size() - 1).startsWith("#") && lines.get(lines.size() - 1).contains("36 not sent"), lines.get(lines.size() - 1));
    }

    /** Past the buffer's capacity records are dropped and counted (best effort); the first ones are all there, in order. */
    @Test
    void aFullTraceBufferDropsAndCounts() throws IOException {
        int extra = 100;
        List<String> lines = trace(new long[] {DocaDpaTrace.CAPACITY + extra, 1, 0});
        assertEquals(DocaDpaTrace.CAPACITY + 1, lines.size());
        for (int i = 0; i < DocaDpaTrace.CAPACITY; i++) {
            assertEquals(line(0, i), lines.get(i));
        }
        assertEquals(extra, dpa.traceDropped());
        assertTrue(lines.get(DocaDpaTrace.CAPACITY).contains(extra + " record(s) dropped"), lines.get(DocaDpaTrace.CAPACITY));
    }

    /** Two threads tracing at once: every record of each is there once, each thread's in its order. */
    @Test
    void twoThreadsTracingAtOnceLoseNothing() throws IOException {
        long a = 1L << 40;
        long b = 2L << 40;
        List<String> lines = trace(new long[] {200, 1, a}, new long[] {200, 1, b});
        assertEquals(400, lines.size(), "every record once");
        for (long tag : new long[] {a, b}) {
            List<String> mine = lines.stream().filter(l -> Long.decode(l.substring(0, 18)) >= tag && Long.decode(l.substring(0, 18)) < tag + 200).toList();
            List<String> want = new ArrayList<>();
            for (long i = 0; i < 200; i++) {
                want.add(line(tag, i));
            }
            assertEquals(want, mine, "thread " + (tag >> 40) + "'s records in its order");
        }
    }

    @Test
    void thePathIsSetBeforeStartOnly() throws IOException {
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, () -> dpa.traceFileSetPath("")).error());
        dpa.start();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, () -> dpa.traceFileSetPath(file.toString())).error());
        dpa.stop();
        assertFalse(Files.exists(file), "nothing traced, nothing written");
    }
}
