package org.peerdirect.mlx4.jfr;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/**
 * The JFR event of the mlx4 driver: a firmware command through the HCR ({@code mlx4_cmd_post}
 * and its poll or event wait), as the command log records it. Cheap when not recording: a site
 * asks {@link Command#on()} first (the event type's enabled flag) and allocates nothing when off.
 */
public final class Mlx4JfrEvents {

    private Mlx4JfrEvents() {
    }

    @Name("org.peerdirect.Mlx4Command")
    @Label("mlx4 Firmware Command")
    @Category({"peerdirect", "mlx4", "Firmware"})
    @Description("One command through the ConnectX-3's HCR: opcode, op_mod, in_modifier, completion mode, status, latency")
    @StackTrace(false) // frequent, and the site is always the same
    public static final class Command extends Event {
        private static final Command PROBE = new Command();

        @Label("Device")
        public String device;

        @Label("Opcode")
        public String opcode;

        @Label("Op Mod")
        public int opMod;

        @Label("In Modifier")
        public int inMod;

        @Label("Events")
        @Description("Completion by event (EQ) rather than by polling the HCR")
        public boolean events;

        @Label("Status")
        @Description("The HCR status, -1 when the command did not complete (not sent, timed out)")
        public int status;

        @Label("Latency")
        @Timespan(Timespan.NANOSECONDS)
        public long latency;

        @Label("Error")
        public String error;

        public static boolean on() {
            return PROBE.isEnabled();
        }

        public static void commit(String device, String opcode, int opMod, int inMod, boolean events, int status, long latencyNanos,
                String error) {
            Command e = new Command();
            if (e.shouldCommit()) {
                e.device = device;
                e.opcode = opcode;
                e.opMod = opMod;
                e.inMod = inMod;
                e.events = events;
                e.status = status;
                e.latency = latencyNanos;
                e.error = error;
                e.commit();
            }
        }
    }
}
