package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.dpa.samples.dev.PingPongDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.dpa.DpaLabFixture;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.PingPongDevStubs;

/**
 * DPA_MODEL.md §4 scenario 7, DOCA's {@code dpa_ping_pong} sample: a ping thread and a pong thread,
 * each with its DOCA RDMA context (data path on the DPA) and its completion context, the two
 * contexts connected; the first iteration by RPC, then 100 iterations of post_receive/post_send of
 * the values 0..99 in each direction, each thread polling its completion context. Observe: both
 * received-value arrays are [1]*100 and both sync events are set. In dpa-samples beside its device
 * program ({@link org.peerdirect.dpa.samples.dev.PingPongDev}), which itest runs too.
 */
class DpaPingPongTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(120);
    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;

    DpaPingPongTest() {
        super(PingPongDevStubs.APP);
    }

    private int dpaMap(long daddr, long len) {
        return dpaMmap(dpa, dev, daddr, len, RW).devGetDpaHandle(dev);
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    /** One side: its thread (with TLS), completion context, RDMA context, buffers and event; returns its argument block. */
    private record Side(DocaRdma rdma, DocaDpaThread thread, long arg, long values, DocaSyncEvent ev) {
    }

    private Side side(boolean ping, boolean noRepost) {
        return side(ping, noRepost, 0);
    }

    /** {@code rounds} non-zero: the exchange runs free, ping counting its round trips there (the bench's mode). */
    private Side side(boolean ping, boolean noRepost, long rounds) {
        long values = alloc(4L * ITERATIONS);
        long tls = alloc(TLS_SIZE);
        dpa.h2dMemcpy(tls, le(values, 0, ping ? 1 : 0, noRepost ? 1 : 0, rounds));
        long arg = alloc(PP_SIZE);
        DocaDpaThread t = DocaDpaThread.create(dpa);
        undo.add(t::destroy);
        t.setFuncArg(PingPongDevStubs.THREAD_KERNEL, arg);
        t.setLocalStorage(tls);
        t.start();
        DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, 16);
        undo.add(comp::destroy);
        comp.setThread(t);
        comp.start();
        DocaRdma r = DocaRdma.create(dev);
        r.setPermissions(RW);
        r.setDatapathOnDpa(dpa);
        r.setRecvQueueSize(4);
        r.setSendQueueSize(8);
        r.dpaCompletionAttach(comp);
        r.start();
        undo.add(r::destroy);
        DocaSyncEvent ev = dpaEvent();
        long recv = alloc(64);
        long send = alloc(64);
        dpa.h2dMemcpy(arg, le(comp.getDpaHandle(), r.getDpaHandle(), recv, dpaMap(recv, 64), 8, send, dpaMap(send, 64), 8,
                ev.getDpaHandle(dpa), 1));
        return new Side(r, t, arg, values, ev);
    }

    private void connectAndTrigger(Side ping, Side pong) {
        DocaRdma.Export a = ping.rdma().export();
        DocaRdma.Export b = pong.rdma().export();
        ping.rdma().connect(b.connectionDetails(), a.connection());
        pong.rdma().connect(a.connectionDetails(), b.connection());
        ping.thread().run();
        pong.thread().run();
        dpa.rpc(PingPongDevStubs.TRIGGER_FIRST_ITERATION_RPC, ping.arg(), pong.arg());
    }

    private List<Integer> received(Side s) {
        ByteBuffer v = ByteBuffer.wrap(dpa.d2hMemcpy(s.values(), 4 * ITERATIONS)).order(ByteOrder.LITTLE_ENDIAN);
        List<Integer> got = new ArrayList<>();
        for (int i = 0; i < ITERATIONS; i++) {
            if (v.getInt(4 * i) == 1) {
                got.add(i);
            }
        }
        return got;
    }

    @Test
    void hundredIterationsEachWayBothArraysFullBothEventsSet() {
        Side ping = side(true, false);
        Side pong = side(false, false);
        connectAndTrigger(ping, pong);
        ping.ev().waitGt(0, -1L, BOUND);
        pong.ev().waitGt(0, -1L, BOUND);
        List<Integer> all = java.util.stream.IntStream.range(0, ITERATIONS).boxed().toList();
        for (Side s : List.of(ping, pong)) {
            assertEquals(all, received(s), (s == ping ? "ping" : "pong") + ": every value 0..99 received");
            assertEquals(1, s.ev().get(), "the event is set");
            assertEquals(1, s.thread().activations(), "one activation: the thread polls, it never reschedules");
        }
    }

    /**
     * The mutant: pong does not re-post its receive after the first value. Ping's second send then
     * finds no receive (RNR, retried without end): the exchange stops after one iteration, neither
     * event is set, and the arrays hold the first value only.
     */
    @Test
    void withoutRepostingTheReceiveTheExchangeStops() {
        Side ping = side(true, false);
        Side pong = side(false, true);
        connectAndTrigger(ping, pong);
        DocaException e = assertThrows(DocaException.class, () -> ping.ev().waitGt(0, -1L, Duration.ofSeconds(3)));
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, e.error());
        assertEquals(0, pong.ev().get(), "pong's event is not set");
        assertEquals(List.of(0), received(pong), "pong got the first value only");
        assertEquals(List.of(0), received(ping), "ping got pong's answer to it, then nothing");
    }

    /**
     * The bench's mode ({@code DocaPingPongBench}): with {@code TLS_ROUNDS} set the exchange runs on
     * past the sample's 100 iterations, ping counting each round trip with an atomic the host reads
     * while it runs; no thread ends, so neither event is set, until the host raises the run's stop
     * word: then each thread raises its "finished" word and finishes (the bench's teardown).
     */
    @Test
    void runFreeTheExchangeGoesPastTheHundredUntilTheStopWord() {
        long rounds = alloc(64);
        Side ping = side(true, false, rounds);
        Side pong = side(false, false, rounds);
        connectAndTrigger(ping, pong);
        long deadline = System.nanoTime() + BOUND.toNanos();
        long n;
        while ((n = ByteBuffer.wrap(dpa.d2hMemcpy(rounds, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong()) <= 2 * ITERATIONS) {
            assertTrue(System.nanoTime() < deadline, "round trips counted past " + 2 * ITERATIONS + ": " + n);
            java.util.concurrent.locks.LockSupport.parkNanos(200_000); // each look is an RDMA READ: not continuously (as the bench)
        }
        List<Integer> all = java.util.stream.IntStream.range(0, ITERATIONS).boxed().toList();
        for (Side s : List.of(ping, pong)) {
            assertEquals(all, received(s), (s == ping ? "ping" : "pong") + ": the sample's values 0..99 received on the way");
            assertEquals(0, s.ev().get(), "no thread ended: the event is not set");
            assertEquals(1, s.thread().activations(), "one activation: the thread still polls");
        }
        assertTrue(lab.dpa().stream().noneMatch(l -> l.matches(".*\\bC[1-7]\\b.*")), "no memory-model finding: " + lab.dpa());
        dpa.memset(rounds + RUN_STOP, 1, 8); // the bench's teardown: both threads finish before their RDMA contexts go
        for (int done : new int[] {RUN_PING_DONE, RUN_PONG_DONE}) {
            while (ByteBuffer.wrap(dpa.d2hMemcpy(rounds + done, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong() != 1) {
                assertTrue(System.nanoTime() < deadline, "both threads saw the stop word and finished");
                java.util.concurrent.locks.LockSupport.parkNanos(200_000);
            }
        }
        assertEquals(List.of("no DPA process ended with an error"), lab.crashes(), "the process is alive");
    }
}
