package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.Test;

/**
 * Spin-wait elision ({@link PollWaits}, concurrent mode): a hart polling DPA memory that nothing
 * writes waits for a write with its carrier given up, sees the NIC's write as a spinning hart
 * would, and is still ended by the cycle watchdog when it polls forever.
 */
class PollWaitTest extends DpaRig {

    int pid;
    long heap;

    /** RtosTest's programs ({@code spin}: polls word 0, then adds 1 to word 1; {@code setFlag}: stores 1 in word 0). */
    void boot(DpaConfig c) throws ImageRejected {
        start(c);
        pid = load(UID, RtosTest.image(), 1 << 16);
        heap = unit.heapBase(pid);
    }

    int thread(String entry, long arg) {
        int t = unit.threadCreate(pid, entry, arg, 0, Affinity.ANY, false);
        unit.threadRun(t);
        return t;
    }

    private static void await(BooleanSupplier done, String what) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 20 s: " + what);
            }
            Thread.onSpinWait();
        }
    }

    private void nicStore(long daddr, long v) {
        MemorySegment b = MemorySegment.ofArray(new long[] {v});
        unit.nicWrite(daddr, b, 0, 8);
    }

    @Test
    void aHartPollingUnchangedMemoryWaitsAndSeesTheNicsWrite() throws Exception {
        boot(DpaConfig.test(4, 31).concurrent().withWatchdog(Long.MAX_VALUE));
        int t = thread("spin", heap);
        unit.trigger(t);
        // waits that ended by the bound: the hart waited (nothing wrote) rather than spun
        await(() -> unit.mm.polls.counts()[1] >= 3, "three waits of the polling hart: " + java.util.Arrays.toString(unit.mm.polls.counts()));
        nicStore(heap, 1);
        settle();
        assertEquals(1, peek(heap + 8), "the hart saw the NIC's write and went on");
        assertEquals(ThreadState.FINISHED, unit.threadState(t));
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
    }

    @Test
    void withoutElisionTheHartSpinsAndNoWaitIsCounted() throws Exception {
        boot(DpaConfig.test(4, 32).concurrent().withWatchdog(Long.MAX_VALUE).withElidePolls(false));
        int t = thread("spin", heap);
        unit.trigger(t);
        await(() -> unit.threadState(t) == ThreadState.RUNNING, "the spinner runs");
        long before = totalCycles();
        await(() -> totalCycles() - before > 100L * Runner.POLL_QUIET, "the spinner polls");
        assertArrayEquals(new long[] {0, 0}, unit.mm.polls.counts());
        nicStore(heap, 1);
        settle();
        assertEquals(1, peek(heap + 8));
    }

    @Test
    void theWatchdogStillEndsAHartThatPollsForeverAndNamesIt() throws Exception {
        boot(DpaConfig.test(4, 33).concurrent().withWatchdog(50_000));
        unit.trigger(thread("spin", heap));
        settle();
        assertEquals(ProcessStatus.WATCHDOG, unit.processStatus(pid), unit.crashData(pid));
        assertTrue(unit.crashData(pid).contains("RtosProgs.spin:"), unit.crashData(pid));
        assertTrue(unit.mm.polls.counts()[1] > 0, "it waited on its way to the watchdog");
    }

    @Test
    void aHartsStoreIsSeenByTwoWaitingPollers() throws Exception {
        boot(DpaConfig.test(6, 34).concurrent().withWatchdog(Long.MAX_VALUE));
        int[] spinners = {thread("spin", heap), thread("spin", heap)};
        for (int s : spinners) {
            unit.trigger(s);
        }
        await(() -> unit.mm.polls.counts()[1] >= 2, "the spinners wait");
        unit.trigger(thread("setFlag", heap));
        settle();
        assertEquals(2, peek(heap + 8), "both saw the hart's store");
    }

    private long totalCycles() {
        long c = 0;
        for (long x : unit.eus.cycles) {
            c += x;
        }
        return c;
    }
}
