package org.peerdirect.mlx5.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;
import jdk.jfr.Unsigned;

/**
 * The JFR events of the mlx5 driver: a device page fault served ({@code mlx5_ib_pfault} up to its
 * resume) and a firmware command ({@code mlx5_cmd_exec}, as the command log records it).
 *
 * <p>Cheap when not recording: each reads the event type's enabled flag through a shared probe
 * instance first and allocates nothing when it is off.
 */
public final class Mlx5JfrEvents {

    private Mlx5JfrEvents() {
    }

    /** One page-fault EQE handled: the translation made present (or not) and the QP resumed. */
    @Name("org.peerdirect.Mlx5PageFault")
    @Label("mlx5 Page Fault Served")
    @Category({"peerdirect", "mlx5", "ODP"})
    @Description("An ODP page fault the device raised, served by the driver: pages mapped by UMR, then PAGE_FAULT_RESUME "
            + "(with the error bit when it could not be resolved)")
    @StackTrace(false) // frequent, and the site is always the same
    public static final class PageFault extends Event {
        private static final PageFault PROBE = new PageFault();

        @Label("Device")
        public String device;

        @Label("Subtype")
        @Description("WQE (the device could not read a work request's buffers) or RDMA (an incoming RDMA's target)")
        public String subtype;

        @Label("Type")
        @Description("The EQE's fault type bits: requestor, write, RDMA")
        public int type;

        @Label("WQ Number")
        @Description("The QP (or SRQ) of a WQE fault")
        public int wqNumber;

        @Label("WQE Index")
        @Description("The work request of a WQE fault (its buffers' addresses are in the WQE, not in the EQE)")
        public int wqeIndex;

        @Label("Key")
        @Description("The rkey of an RDMA fault")
        @Unsigned
        public int key;

        @Label("Address")
        @Description("The faulting address of an RDMA fault (0 for a WQE fault)")
        @Unsigned
        public long address;

        @Label("Length")
        @Description("The RDMA operation's length (0: unknown, the packet's then)")
        @DataAmount
        public long length;

        @Label("Resolved")
        @Description("false: resumed with the error bit, the work request completes in error")
        public boolean resolved;

        public static PageFault start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            PageFault e = new PageFault();
            e.begin();
            return e;
        }

        public static void done(PageFault e, String device, boolean wqe, int type, int wqNumber, int wqeIndex, int key, long address,
                long length, boolean resolved) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.device = device;
                e.subtype = wqe ? "WQE" : "RDMA";
                e.type = type;
                e.wqNumber = wqNumber;
                e.wqeIndex = wqeIndex;
                e.key = key;
                e.address = address;
                e.length = length;
                e.resolved = resolved;
                e.commit();
            }
        }
    }

    /** One command through the command queue, as it ended. */
    @Name("org.peerdirect.Mlx5Command")
    @Label("mlx5 Firmware Command")
    @Category({"peerdirect", "mlx5", "Firmware"})
    @Description("One command of the mlx5 command interface: opcode, op_mod, completion mode, delivery and command status, syndrome, "
            + "latency from the doorbell")
    @StackTrace(false) // frequent, and the site is always the same
    public static final class Command extends Event {
        private static final Command PROBE = new Command();

        @Label("Device")
        public String device;

        @Label("Opcode")
        public String opcode;

        @Label("Op Mod")
        public int opMod;

        @Label("Events")
        @Description("Completion by event (EQ) rather than by polling")
        public boolean events;

        @Label("Delivery Status")
        public int delivery;

        @Label("Status")
        @Description("The command's status byte, -1 when there is no output")
        public int status;

        @Label("Syndrome")
        @Unsigned
        public int syndrome;

        @Label("Latency")
        @Timespan(Timespan.NANOSECONDS)
        public long latency;

        @Label("Error")
        @Description("Why the command has no output (not sent, timed out), else null")
        public String error;

        public static boolean on() {
            return PROBE.isEnabled();
        }

        public static void commit(String device, String opcode, int opMod, boolean events, int delivery, int status, int syndrome,
                long latencyNanos, String error) {
            Command e = new Command();
            if (e.shouldCommit()) {
                e.device = device;
                e.opcode = opcode;
                e.opMod = opMod;
                e.events = events;
                e.delivery = delivery;
                e.status = status;
                e.syndrome = syndrome;
                e.latency = latencyNanos;
                e.error = error;
                e.commit();
            }
        }
    }
}
