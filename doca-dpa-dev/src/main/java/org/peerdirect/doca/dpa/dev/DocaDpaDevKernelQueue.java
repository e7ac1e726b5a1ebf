package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The kernel launch dispatcher on the DPA ([model], DPA_MODEL.md §2.5: NVIDIA's runtime is not
 * public): the wait of {@code doca_dpa_kernel_launch_update_*} for its wait event, without a host
 * thread. Two runtime entries dpacc links beside {@link DocaDpaDevKernel}'s:
 * {@value #DISPATCH_SYMBOL}, the dispatcher thread's handler, and {@value #KICK_SYMBOL}, an RPC that
 * activates it.
 *
 * <p>The queue block in DPA memory (8-byte words, little-endian): the first position the
 * dispatcher may still find queued ({@link #Q_HEAD}, the dispatcher's), the next position the
 * host fills ({@link #Q_TAIL}, the host's), the dispatcher thread's id ({@link #Q_THREAD}), the
 * launches it started ({@link #Q_STARTS}), then a ring of {@link #CAPACITY} control block
 * addresses from {@link #Q_RING}. A queued launch is its pool slot's control block
 * ({@link DocaDpaDevKernel}) with its wait words ({@code C_WAIT}: the wait event's DPA handle or 0,
 * {@code C_WAIT_THRESHOLD}, {@code C_WAIT_GE}: the comparison, {@code C_GATE}: non-zero while the
 * host's look holds it) and {@code C_QUEUED} = its position + 1. The host writes the control block,
 * then the ring entry, then the tail (its copy path, in that order), then calls
 * {@value #KICK_SYMBOL} (one RPC). A ring entry whose block's {@code C_QUEUED} does not name its
 * position is stale (the slot was reused for a later launch) and is skipped.
 *
 * <p>A pass ({@link #dispatchHandler}): every queued launch whose wait passed starts, in position
 * (submission) order — {@code C_QUEUED} cleared first, then {@link DocaDpaDevKernel#startRanks}; then
 * the dispatcher sets the watch word of each still-queued launch's event
 * ({@link DocaDpaDevSyncEvent#watch}), fences, and looks at those events again: one that passed
 * meanwhile makes another pass. So an update either finds the watch (and activates the dispatcher:
 * a running one re-runs once, the RTOS latches the trigger) or is seen by that look. The
 * dispatcher moves the words the host reads through the NIC (the head, a block's queued word) with
 * atomics (a plain store would leave a dirty granule the NIC sees old, C1), writes its other stores
 * back and gives its EU back; it never waits on an EU. Starting a launch clears its event's
 * watch; the events of launches still queued are watched again in the same pass.
 *
 * <p>Wakers: a DPA update of a watched event (a rank, a DPA thread: {@link DocaDpaDevSyncEvent});
 * the host's {@value #KICK_SYMBOL} after a submission and after a host update of an event a queued
 * launch waits on; the host's slow look for an event nothing on this DPA can see updated (a
 * remote publisher's), which opens {@code C_GATE} and kicks.
 */
public final class DocaDpaDevKernelQueue {

    /** The dispatcher thread's entry. */
    public static final String DISPATCH_SYMBOL = "doca_dpa_dev_kernel_dispatch";
    /** The RPC that activates the dispatcher (argument: the queue block). */
    public static final String KICK_SYMBOL = "doca_dpa_dev_kernel_kick";
    /** Queue block words. */
    public static final int Q_HEAD = 0, Q_TAIL = 8, Q_THREAD = 16, Q_STARTS = 24, Q_RING = 64;
    /** Ring entries. */
    public static final int CAPACITY = 256;
    /** The queue block's size. */
    public static final int SIZE = Q_RING + 8 * CAPACITY;

    private DocaDpaDevKernelQueue() {
    }

    /** {@value #KICK_SYMBOL}: activates the dispatcher thread (latched if it runs). Returns 0. */
    public static long kick(long argbuf) {
        long q = Dpa.ld64(argbuf);
        FlexioDev.eventHandlerActivate((int) Dpa.ld64(q + Q_THREAD));
        return 0;
    }

    /** {@value #DISPATCH_SYMBOL} (argument: the queue block): passes until nothing queued passes, then reschedules. */
    public static void dispatchHandler(long q) {
        int self = FlexioDev.getThreadId();
        long head = Dpa.ld64(q + Q_HEAD);
        long tail = Dpa.ld64(q + Q_TAIL);
        Dpa.memoryFence(Dpa.R, Dpa.R); // the tail before the ring entries and blocks the host wrote before it
        boolean again = true;
        while (again) {
            for (long i = head; i < tail; i++) {
                long c = queued(q, i);
                if (c != 0 && passes(c)) {
                    start(q, c);
                }
            }
            for (long i = head; i < tail; i++) { // still waiting: watch the event
                long c = queued(q, i);
                long ev = c == 0 ? 0 : Dpa.ld64(c + DocaDpaDevKernel.C_WAIT);
                if (ev != 0) {
                    DocaDpaDevSyncEvent.watch(ev, self);
                }
            }
            Dpa.memoryFence(Dpa.RW, Dpa.RW); // the watches before the looks (see wakeWatcher)
            again = false;
            for (long i = head; i < tail && !again; i++) {
                long c = queued(q, i);
                again = c != 0 && passes(c);
            }
        }
        while (head < tail && queued(q, head) == 0) {
            head++;
        }
        Dpa.amoSwap64(q + Q_HEAD, head); // an atomic, at memory at once: the host reads the head through the NIC when its ring looks full
        Dpa.memoryWriteback(); // this pass's other stores (watch words) out of the write buffer before the EU goes
        FlexioDev.threadReschedule();
    }

    /** The control block at ring position {@code i} if it is queued there, else 0. */
    private static long queued(long q, long i) {
        long c = Dpa.ld64(q + Q_RING + 8 * (i % CAPACITY));
        return c != 0 && Dpa.ld64(c + DocaDpaDevKernel.C_QUEUED) == i + 1 ? c : 0;
    }

    /** Whether the launch may start: its gate open and its wait event (if any) past the threshold under its comparison. */
    private static boolean passes(long c) {
        if (Dpa.ld64(c + DocaDpaDevKernel.C_GATE) != 0) {
            return false;
        }
        long ev = Dpa.ld64(c + DocaDpaDevKernel.C_WAIT);
        if (ev == 0) {
            return true;
        }
        int cmp = Long.compareUnsigned(DocaDpaDevSyncEvent.get(ev), Dpa.ld64(c + DocaDpaDevKernel.C_WAIT_THRESHOLD));
        return Dpa.ld64(c + DocaDpaDevKernel.C_WAIT_GE) != 0 ? cmp >= 0 : cmp > 0;
    }

    /**
     * Starts a launch: its event's watch cleared first (watched again at this pass's end if another
     * launch waits on it), while the launch is still queued: once it leaves the queue the host may
     * free the event (a stop or destroy finds no launch waiting on it), and the clear would land in
     * freed memory. Then it leaves the queue, before its ranks run (the last one frees the block
     * and the host may queue the next launch in it: a later clear would drop that one), with an
     * atomic: at memory at once, so the host's reads through the NIC never meet a dirty granule (a
     * plain store there is C1 until written back). Then the ranks.
     */
    private static void start(long q, long c) {
        long ev = Dpa.ld64(c + DocaDpaDevKernel.C_WAIT);
        if (ev != 0) {
            DocaDpaDevSyncEvent.unwatch(ev);
        }
        Dpa.amoSwap64(c + DocaDpaDevKernel.C_QUEUED, 0);
        Dpa.amoAdd64(q + Q_STARTS, 1);
        DocaDpaDevKernel.startRanks(c);
    }
}
