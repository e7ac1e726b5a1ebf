package org.peerdirect.hca.dpa;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/**
 * The JFR events of the DPA: one activation of a DPA thread, from the handler's entry on its EU to
 * its exit (issue 46 item 3), and the hops of the wake-up chain a DPA round trip crosses (issue
 * 43): a trigger's way to the handler's first instruction ({@link Wake}), an elided poll's wait
 * for a write ({@link PollWait}), and what the NIC does at once for an outbox doorbell
 * ({@link Doorbell}). Cheap when not recording: each reads its type's enabled flag through a shared
 * probe and neither allocates nor reads the clock unless a recording wants it.
 */
final class DpaEvents {

    private DpaEvents() {
    }

    /** One activation (a continuable thread's yields and resumptions inside it), with how it ended. */
    @Name("org.peerdirect.DpaActivation")
    @Label("DPA Activation")
    @Category({"peerdirect", "DPA"})
    @Description("One activation of a DPA thread: the handler run from its entry on an execution unit to its exit (reschedule, "
            + "finish, retrigger, process end), with the EU and the cycles it was charged")
    @StackTrace(false)
    static final class Activation extends Event {
        private static final Activation PROBE = new Activation();

        @Label("Process")
        @Description("The DPA process (DPA_PROCESS object id)")
        int process;

        @Label("Thread")
        @Description("The DPA thread (DPA_THREAD object id)")
        int thread;

        @Label("Entry")
        @Description("The handler's symbol in the image")
        String entry;

        @Label("EU")
        @Description("The execution unit it ended on (-1: it ended while suspended)")
        int eu;

        @Label("Exit")
        @Description("RESCHEDULE, FINISH, RETRIGGER or PROCESS_END")
        String exit;

        @Label("Cycles")
        @Description("Cycles charged since the activation (or its last continuable yield) started")
        long cycles;

        /** A begun event when a recording wants it, else null (nothing allocated). */
        static Activation start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            Activation e = new Activation();
            e.begin();
            return e;
        }

        /** Ends and commits an event {@link #start} returned (null: nothing to do). */
        static void done(Activation e, DpaThread t, int eu, ActivationExit.Kind exit, long cycles) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.process = t.process.id;
                e.thread = t.id;
                e.entry = t.entry.name();
                e.eu = eu;
                e.exit = exit.name();
                e.cycles = cycles;
                e.commit();
            }
        }
    }

    /**
     * A trigger's way to the handler's first instruction, hop by hop, in concurrent mode (the
     * deterministic scheduler runs harts on the driving thread: none of these hops exist there).
     * Not for a trigger latched while the thread ran (its wait is the running activation's rest).
     */
    @Name("org.peerdirect.DpaWake")
    @Label("DPA Wake")
    @Category({"peerdirect", "DPA"})
    @Description("A DPA thread's trigger (CQE on an armed CQ, activation, host run) to its handler's first instruction: "
            + "queued for an EU, the activation's virtual thread mounted, the carrier permit taken, the entry reached")
    @StackTrace(false)
    static final class Wake extends Event {
        private static final Wake PROBE = new Wake();

        @Label("Thread")
        int thread;

        @Label("How")
        @Description("start: a new activation's virtual thread; resume: a continuable thread's after its yield")
        String how;

        @Label("Queued")
        @Description("Trigger to EU granted (the RTOS's run queue)")
        @Timespan(Timespan.NANOSECONDS)
        long queued;

        @Label("Mount")
        @Description("EU granted to the activation's virtual thread running (virtual-thread start or unpark, ForkJoinPool)")
        @Timespan(Timespan.NANOSECONDS)
        long mount;

        @Label("Carrier")
        @Description("Virtual thread running to its carrier permit taken (the fair carrier semaphore)")
        @Timespan(Timespan.NANOSECONDS)
        long carrier;

        @Label("Entry")
        @Description("Carrier permit to the handler's first instruction")
        @Timespan(Timespan.NANOSECONDS)
        long entry;

        /** Whether a recording wants the hops (the RTOS and the scheduler stamp them only then). */
        static boolean enabled() {
            return PROBE.isEnabled();
        }

        /** Commits the hops of {@code r}'s wake from {@code triggered} (nanoTime stamps; 0: not stamped, nothing committed). */
        static void commit(Runner r, String how, long triggered) {
            long granted = r.grantedNanos;
            if (granted == 0) {
                return; // not recording when it was granted: nothing stamped, nothing to clear
            }
            r.grantedNanos = 0;
            long mounted = r.mountedNanos;
            long carrier = r.carrierNanos;
            if (triggered == 0 || mounted == 0 || carrier == 0) {
                return;
            }
            Wake e = new Wake();
            if (e.shouldCommit()) {
                e.thread = r.thread.id;
                e.how = how;
                e.queued = granted - triggered;
                e.mount = mounted - granted;
                e.carrier = carrier - mounted;
                e.entry = System.nanoTime() - carrier;
                e.commit();
            }
        }
    }

    /**
     * One elided poll ({@link PollWaits}): the hart gave up its carrier at the event's start and had
     * it back at its end. {@code signalled} and {@code woke} are the writer's signal and the wait's
     * return (nanoTime; stamped by {@link PollWaits} while a recording wants the event).
     */
    @Name("org.peerdirect.DpaPollWait")
    @Label("DPA Poll Wait")
    @Category({"peerdirect", "DPA"})
    @Description("A DPA hart polling unchanged DPA memory waits for a write: memory unchanged until a write's signal, "
            + "the signal to the hart's virtual thread running again, then to its carrier permit")
    @StackTrace(false)
    static final class PollWait extends Event {
        private static final PollWait PROBE = new PollWait();

        @Label("Thread")
        int thread;

        @Label("Outcome")
        @Description("WOKEN (a write's signal), SPUN (a write seen while spinning, no park), BOUND (the wait's bound passed), "
                + "INTERRUPTED")
        String outcome;

        @Label("Unchanged")
        @Description("The wait's start to the first write's signal (or the bound)")
        @Timespan(Timespan.NANOSECONDS)
        long unchanged;

        @Label("Wake")
        @Description("The write's signal to the waiting virtual thread running again (condition signal, unpark, ForkJoinPool)")
        @Timespan(Timespan.NANOSECONDS)
        long wake;

        @Label("Carrier")
        @Description("The waiter running again to its carrier permit taken back (the fair carrier semaphore)")
        @Timespan(Timespan.NANOSECONDS)
        long carrier;

        /** First signal after the wait began (PollWaits' lock), and the wait's return. */
        transient long signalled;
        transient long woke;
        transient long begun;

        /** A begun event when a recording wants it, else null (nothing allocated, no clock read). */
        static PollWait start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            PollWait e = new PollWait();
            e.begin();
            e.begun = System.nanoTime();
            return e;
        }

        /** Ends and commits {@code e} (null: nothing to do) now that {@code thread}'s hart has its carrier back. */
        static void done(PollWait e, int thread, String outcome) {
            if (e == null) {
                return;
            }
            long now = System.nanoTime();
            e.end();
            if (e.shouldCommit()) {
                long woke = e.woke == 0 ? now : e.woke;
                long signalled = e.signalled == 0 ? woke : e.signalled;
                e.thread = thread;
                e.outcome = outcome;
                e.unchanged = signalled - e.begun;
                e.wake = woke - signalled;
                e.carrier = now - woke;
                e.commit();
            }
        }
    }

    /**
     * An outbox doorbell and what the NIC does at once in the hart's thread (an MMIO write the NIC
     * takes synchronously: for {@code SXD_DB} the WQE fetch, the transport, and in one JVM the
     * responder's receive CQE and the requester's completion).
     */
    @Name("org.peerdirect.DpaDoorbell")
    @Label("DPA Doorbell")
    @Category({"peerdirect", "DPA"})
    @Description("A DPA outbox doorbell (CQ_DB, SXD_DB, RXT_DB, EQ_DB_NO_REARM) and the NIC's work it causes at once")
    @StackTrace(false)
    static final class Doorbell extends Event {
        private static final Doorbell PROBE = new Doorbell();

        @Label("Register")
        String register;

        @Label("Queue")
        @Description("The CQ, QP or EQ number the doorbell names")
        int queue;

        static Doorbell start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            Doorbell e = new Doorbell();
            e.begin();
            return e;
        }

        static void done(Doorbell e, String register, int queue) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.register = register;
                e.queue = queue;
                e.commit();
            }
        }
    }
}
