package org.peerdirect.hca.dpa;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * The JFR event of the DPA: one activation of a DPA thread, from the handler's entry on its EU to
 * its exit (issue 46 item 3). Cheap when not recording: {@link Activation#start} reads the event
 * type's enabled flag through a shared probe and allocates nothing unless a recording wants it.
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
}
