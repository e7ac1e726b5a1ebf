package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpa.ThreadState.Event;
import org.peerdirect.hca.dpa.progs.RtosProgs;

/** The DPA RTOS: thread states, triggers, exits, process errors, EUs, the two schedulers. */
class RtosTest extends DpaRig {

    static final String[] GLOBALS = {"count", "selfTrigger", "finishOnce", "retrigger5", "continuable", "processFinish",
        "userError", "trap", "outside", "unaligned", "spin", "setFlag", "euId", "racyIncrement", "activateOther", "javaLoop"};

    static byte[] image() {
        ImagePackager p = new ImagePackager().add(RtosProgs.class);
        for (String g : GLOBALS) {
            p.global(g, RtosProgs.class, g);
        }
        return p.rpc("add", RtosProgs.class, "add", 16).pack();
    }

    int pid;
    long heap;

    int thread(String entry, long arg) {
        int t = unit.threadCreate(pid, entry, arg, 0, Affinity.ANY, entry.equals("continuable"));
        unit.threadRun(t);
        return t;
    }

    void boot(DpaConfig c) throws ImageRejected {
        start(c);
        pid = load(UID, image(), 1 << 16);
        heap = unit.heapBase(pid);
    }

    @Test
    void stateMachineHasOneTransitionMethod() {
        assertEquals(ThreadState.WAITING, ThreadState.CREATED.next(Event.RUN));
        assertEquals(ThreadState.RUNNABLE, ThreadState.WAITING.next(Event.TRIGGER));
        assertEquals(ThreadState.RUNNING, ThreadState.RUNNABLE.next(Event.EU_GRANTED));
        assertEquals(ThreadState.SUSPENDED, ThreadState.RUNNING.next(Event.YIELD));
        assertEquals(ThreadState.RUNNABLE, ThreadState.SUSPENDED.next(Event.TRIGGER));
        assertEquals(ThreadState.FINISHED, ThreadState.RUNNING.next(Event.FINISH));
        assertEquals(ThreadState.PROCESS_ENDED, ThreadState.WAITING.next(Event.PROCESS_END));
        assertThrows(IllegalStateException.class, () -> ThreadState.FINISHED.next(Event.TRIGGER));
        assertThrows(IllegalStateException.class, () -> ThreadState.CREATED.next(Event.TRIGGER));
    }

    @Test
    void eachTriggerIsOneActivationStartingAtTheEntry() throws Exception {
        boot(DpaConfig.test(4, 1));
        int t = thread("count", heap);
        assertFalse(unit.trigger(unit.threadCreate(pid, "count", heap, 0, Affinity.ANY, false)), "a created thread is not triggerable");
        for (int i = 0; i < 3; i++) {
            assertTrue(unit.trigger(t));
            settle();
        }
        assertEquals(3, peek(heap));
        assertEquals(ThreadState.WAITING, unit.threadState(t));
        assertTrue(unit.describeThread(t).contains("activations 3"), unit.describeThread(t));
        List<String> d = unit.describe();
        assertTrue(d.get(0).equals("eus 4 (reserved 2) busy 0") && d.stream().anyMatch(l -> l.startsWith("eu 2 free activations 3")),
                d.toString());
    }

    @Test
    void anotherProcesssThreadCannotBeActivated() throws Exception {
        boot(DpaConfig.test(4, 18));
        int p2 = load(UID, image(), 4096);
        int foreign = unit.threadCreate(p2, "count", unit.heapBase(p2), 0, Affinity.ANY, false);
        unit.threadRun(foreign);
        poke(heap + 8, foreign);
        unit.trigger(thread("activateOther", heap));
        settle();
        assertEquals(1, peek(heap), "activate returned non-zero");
        assertEquals(0, peek(unit.heapBase(p2)), "the other process's thread never ran");
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
    }

    /** Open question 2 of DPA_MODEL.md §6: a trigger while running is latched once, a second is dropped. */
    @Test
    void aTriggerWhileRunningIsLatchedOnce() throws Exception {
        boot(DpaConfig.test(4, 2));
        int t = thread("selfTrigger", heap);
        unit.trigger(t);
        settle();
        assertEquals(2, peek(heap), "the latched trigger re-ran the handler once");
        assertTrue(unit.describeThread(t).contains("latched 1 ignored 1"), unit.describeThread(t));
    }

    @Test
    void finishIgnoresLaterTriggersAndRetriggerRunsAgainAtOnce() throws Exception {
        boot(DpaConfig.test(4, 3));
        int f = thread("finishOnce", heap);
        unit.trigger(f);
        settle();
        assertFalse(unit.trigger(f));
        assertEquals(ThreadState.FINISHED, unit.threadState(f));
        assertEquals(1, peek(heap));
        int r = thread("retrigger5", heap + 64);
        unit.trigger(r);
        settle();
        assertEquals(5, peek(heap + 64));
        assertEquals(ThreadState.FINISHED, unit.threadState(r));
    }

    @Test
    void aContinuableYieldResumesAfterTheYieldOnTheNextTrigger() throws Exception {
        boot(DpaConfig.test(4, 4));
        int t = thread("continuable", heap);
        unit.trigger(t);
        settle();
        assertEquals(1, peek(heap));
        assertEquals(ThreadState.SUSPENDED, unit.threadState(t));
        unit.trigger(t);
        settle();
        assertEquals(2, peek(heap));
        assertEquals(ThreadState.FINISHED, unit.threadState(t));
    }

    @Test
    void processFinishEndsEveryThreadWithStatus0x40AndNoError() throws Exception {
        boot(DpaConfig.test(4, 5));
        int other = thread("count", heap);
        unit.trigger(thread("processFinish", heap));
        settle();
        assertEquals(ProcessStatus.PROCESS_FINISH, unit.processStatus(pid));
        assertEquals(0, ProcessStatus.errStatus(unit.processStatus(pid)));
        assertFalse(unit.trigger(other), "no new triggers after process finish");
        assertEquals(List.of(), errors, "finishing is not an error event");
    }

    @Test
    void deviceErrorIsAUserErrorTheHostIsTold() throws Exception {
        boot(DpaConfig.test(4, 6));
        poke(heap + 8, 0x90);
        unit.trigger(thread("userError", heap));
        settle();
        assertEquals(0x90, unit.processStatus(pid));
        assertEquals(2, ProcessStatus.errStatus(0x90));
        assertEquals(1, errors.size());
        assertTrue(errors.get(0).startsWith(pid + ":90:flexio_dev_error(0x90) by userError"), errors.get(0));
        assertTrue(unit.crashData(pid).contains("RtosProgs.userError:"), unit.crashData(pid));
    }

    @Test
    void anIllegalUserCodeGives0x42() throws Exception {
        boot(DpaConfig.test(4, 7));
        poke(heap + 8, 0x10);
        unit.trigger(thread("userError", heap));
        settle();
        assertEquals(ProcessStatus.ILLEGAL_ERR, unit.processStatus(pid));
    }

    @Test
    void aHandlerThatThrowsIsAFatalTrapNamingItsLine() throws Exception {
        boot(DpaConfig.test(4, 8));
        unit.trigger(thread("trap", heap));
        settle();
        assertEquals(ProcessStatus.HANDLER_TRAP, unit.processStatus(pid));
        assertEquals(1, ProcessStatus.errStatus(ProcessStatus.HANDLER_TRAP));
        assertTrue(unit.crashData(pid).contains("ArithmeticException") && unit.crashData(pid).contains("RtosProgs.trap:"),
                unit.crashData(pid));
    }

    @Test
    void accessOutsideTheProcessAndUnalignedAccessAreFatal() throws Exception {
        boot(DpaConfig.test(4, 9));
        unit.trigger(thread("outside", heap));
        settle();
        assertEquals(ProcessStatus.ACCESS_FAULT, unit.processStatus(pid));
        assertTrue(unit.crashData(pid).contains("RtosProgs.outside:"), unit.crashData(pid));
        int p2 = load(UID, image(), 4096);
        int t = unit.threadCreate(p2, "unaligned", unit.heapBase(p2), 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
        assertEquals(ProcessStatus.UNALIGNED, unit.processStatus(p2));
        assertEquals(ProcessStatus.ACCESS_FAULT, unit.processStatus(pid), "the other process keeps its own status");
    }

    @Test
    void theWatchdogEndsASpinningHandlerNamingIt() throws Exception {
        boot(DpaConfig.test(4, 10).withWatchdog(5_000));
        unit.trigger(thread("spin", heap));
        settle();
        assertEquals(ProcessStatus.WATCHDOG, unit.processStatus(pid));
        assertTrue(unit.crashData(pid).contains("spin#") && unit.crashData(pid).contains("RtosProgs.spin:"),
                unit.crashData(pid));
    }

    /**
     * A handler stuck in Java code (a loop calling only a JDK method, which the verifier's
     * heuristic lets through) makes no ISA call, so neither the cycle watchdog nor a stop can reach
     * it. The wall-clock watchdog sees an activation without ISA calls for its period: the process
     * ends (WATCHDOG, the loop's line in the crash data), the thread is PROCESS_ENDED and its EU
     * free at once, and the process's destroy returns without waiting for the Java code (the
     * bounded stop). The code runs on until it returns by itself; then nothing is left.
     */
    @Test
    void theWallClockWatchdogTakesBackAnEuStuckInJavaCode() throws Exception {
        boot(DpaConfig.test(4, 19).concurrent().withWallWatchdog(java.time.Duration.ofMillis(200)));
        poke(heap, 1_500_000_000L); // about a second of Java code, far past the watchdog's period
        int t = thread("javaLoop", heap);
        unit.trigger(t);
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (unit.processStatus(pid) == ProcessStatus.OK && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(ProcessStatus.WATCHDOG, unit.processStatus(pid), unit.crashData(pid));
        assertTrue(unit.crashData(pid).contains("wall-clock watchdog") && unit.crashData(pid).contains("RtosProgs.javaLoop:"),
                unit.crashData(pid));
        assertEquals(ThreadState.PROCESS_ENDED, unit.threadState(t));
        assertTrue(unit.describeEus().stream().noneMatch(l -> l.contains(" busy ")), "its EU is free: " + unit.describeEus());
        assertTrue(unit.describeCrashes().get(0).contains("thread " + t + " at org.peerdirect.hca.dpa.progs.RtosProgs.javaLoop:"),
                unit.describeCrashes().toString());
        long t0 = System.nanoTime();
        unit.processDestroy(pid);
        assertTrue(System.nanoTime() - t0 < 5_000_000_000L, "the destroy did not wait for the Java code");
        settle(); // the Java code returned by itself
        assertEquals(List.of(), unit.leaks());
        assertEquals(1, errors.size(), "one error event: " + errors);
    }

    @Test
    void affinityPlacesThreadsAndAFullPartitionQueues() throws Exception {
        boot(DpaConfig.test(4, 11));
        assertThrows(IllegalArgumentException.class, () -> unit.threadCreate(pid, "euId", heap, 0, Affinity.strict(1), false),
                "an OS-reserved EU");
        assertThrows(IllegalArgumentException.class, () -> unit.threadCreate(pid, "euId", heap, 0, Affinity.strict(4), false),
                "an EU outside the partition");
        assertThrows(IllegalArgumentException.class, () -> unit.threadCreate(pid, "nosuch", heap, 0, Affinity.ANY, false),
                "an unknown entry");
        int t = unit.threadCreate(pid, "euId", heap, 0, Affinity.strict(3), false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
        assertEquals(3, peek(heap));
        java.util.BitSet g = new java.util.BitSet();
        g.set(2);
        unit.defineGroup(1, g);
        int u = unit.threadCreate(pid, "euId", heap + 8, 0, Affinity.group(1), false);
        unit.threadRun(u);
        unit.trigger(u);
        settle();
        assertEquals(2, peek(heap + 8));
    }

    @Test
    void withOneUserEuActivationsQueueAndAllRun() throws Exception {
        boot(DpaConfig.test(3, 12));
        int a = thread("spin", heap);
        int b = thread("setFlag", heap);
        unit.trigger(a);
        unit.trigger(b);
        settle();
        // the spinner held the only EU until the watchdog? no: the setter queued behind it and the
        // spinner never yields the EU, so the setter runs only after the watchdog ends the process
        assertEquals(ThreadState.PROCESS_ENDED, unit.threadState(b));
        assertEquals(ProcessStatus.WATCHDOG, unit.processStatus(pid));
        assertEquals(0, peek(heap), "the queued setter never ran: the spinner held the only EU");
    }

    @Test
    void theSameSeedReplaysTheSameInterleaving() throws Exception {
        long[] lost = new long[6];
        for (int run = 0; run < 6; run++) {
            boot(DpaConfig.test(4, run / 2));
            int a = thread("racyIncrement", heap);
            int b = thread("racyIncrement", heap);
            unit.trigger(a);
            unit.trigger(b);
            settle();
            lost[run] = 40 - peek(heap);
            unit.close();
            assertEquals(List.of(), unit.leaks());
            unit = null;
        }
        assertEquals(lost[0], lost[1]);
        assertEquals(lost[2], lost[3]);
        assertEquals(lost[4], lost[5]);
        assertTrue(lost[0] + lost[2] + lost[4] > 0, "some seed interleaves the two read-modify-writes: " + java.util.Arrays.toString(lost));
    }

    @Test
    void destroyWhileAThreadSpinsStopsItFirst() throws Exception {
        boot(DpaConfig.test(4, 13).concurrent().withWatchdog(Long.MAX_VALUE));
        int t = thread("spin", heap);
        unit.trigger(t);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (unit.threadState(t) != ThreadState.RUNNING && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(ThreadState.RUNNING, unit.threadState(t));
        unit.processDestroy(pid);
        assertEquals(List.of(), unit.leaks());
    }

    @Test
    void destroyingASpinningThreadStopsItAndItsProcessGoesOn() throws Exception {
        boot(DpaConfig.test(4, 17).concurrent().withWatchdog(Long.MAX_VALUE));
        int t = thread("spin", heap);
        unit.trigger(t);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (unit.threadState(t) != ThreadState.RUNNING && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        unit.threadDestroy(t);
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
        int c = thread("count", heap + 64);
        unit.trigger(c);
        settle();
        assertEquals(1, peek(heap + 64), "the process still runs its other threads");
    }

    /**
     * Eight busy-waiters started before their setter, on 2-core carriers: with only
     * {@code Thread.yield} at the budget two spinners kept both carriers and the rest never ran.
     */
    @Test
    void concurrentModeBusyWaitersDoNotStarveTheSetter() throws Exception {
        for (int run = 0; run < 8; run++) {
            boot(DpaConfig.test(12, run).concurrent().withWatchdog(Long.MAX_VALUE).withCheck(CheckMode.OFF));
            int[] spinners = new int[8];
            for (int i = 0; i < spinners.length; i++) {
                spinners[i] = thread("spin", heap);
                unit.trigger(spinners[i]);
            }
            unit.trigger(thread("setFlag", heap));
            settle();
            assertEquals(spinners.length, peek(heap + 8));
            for (int s : spinners) {
                assertEquals(ThreadState.FINISHED, unit.threadState(s));
            }
            unit.close();
            assertEquals(List.of(), unit.leaks());
            unit = null;
        }
    }

    @Test
    void anRpcEntryKeepsItsResult() throws Exception {
        boot(DpaConfig.test(4, 15));
        poke(heap, 40);
        poke(heap + 8, 2);
        int t = thread("add", heap);
        unit.trigger(t);
        settle();
        assertEquals(42, unit.rpcResult(t));
    }

    @Test
    void dpaMemoryExhaustedIsRefusedAndLeavesTheUnitWorking() throws Exception {
        boot(DpaConfig.test(4, 16));
        assertThrows(DpaMemoryExhausted.class, () -> load(UID, image(), 64L << 20));
        assertThrows(DpaMemoryExhausted.class, () -> unit.memCreate(UID, Long.MAX_VALUE - 1), "no rounding overflow");
        int t = thread("count", heap);
        unit.trigger(t);
        settle();
        assertEquals(1, peek(heap));
    }
}
