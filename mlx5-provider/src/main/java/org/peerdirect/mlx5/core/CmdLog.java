package org.peerdirect.mlx5.core;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.mlx5.jfr.Mlx5JfrEvents;

/**
 * The recent commands of one device ({@code mlx5:cmdlog}): a bounded ring, oldest dropped first.
 * Each record is one command as the driver saw it end: opcode, op_mod, the completion mode, the
 * delivery status, the command status and syndrome, and the latency from the doorbell to the
 * completion.
 *
 * <p>Thread-safe: appends and snapshots under this object's monitor (no I/O inside).
 */
public final class CmdLog {

    /** One finished command. {@code status} -1: no output (not delivered, timed out or not sent). */
    public record Entry(long seq, int opcode, int opMod, boolean events, int delivery, int status, int syndrome, long latencyNanos,
            String error) {

        @Override
        public String toString() {
            String result;
            if (error != null) {
                result = error;
            } else if (delivery != CmdEntry.DELIVERY_OK) {
                result = "delivery " + CmdEntry.deliveryName(delivery);
            } else {
                result = String.format("status %s(0x%x) syndrome 0x%x", Mlx5Cmd.statusName(status), status, syndrome);
            }
            return String.format("%5d %-20s op_mod 0x%-4x %-5s %9.1f us  %s", seq, Mlx5Cmd.name(opcode), opMod, events ? "event" : "poll",
                    latencyNanos / 1e3, result);
        }
    }

    private final Entry[] ring;
    private long next;

    /** The device's name, for the JFR event each command also is. */
    private final String device;

    CmdLog(int capacity, String device) {
        ring = new Entry[capacity];
        this.device = device;
    }

    void add(int opcode, int opMod, boolean events, int delivery, int status, int syndrome, long latencyNanos, String error) {
        if (Mlx5JfrEvents.Command.on()) { // outside the monitor: the recorder may take its time
            Mlx5JfrEvents.Command.commit(device, Mlx5Cmd.name(opcode), opMod, events, delivery, status, syndrome, latencyNanos, error);
        }
        synchronized (this) {
            ring[(int) (next % ring.length)] = new Entry(next, opcode, opMod, events, delivery, status, syndrome, latencyNanos, error);
            next++;
        }
    }

    /** The recorded commands, oldest first. */
    public synchronized List<Entry> entries() {
        List<Entry> out = new ArrayList<>();
        for (long s = Math.max(0, next - ring.length); s < next; s++) {
            out.add(ring[(int) (s % ring.length)]);
        }
        return out;
    }

    /** Commands ever logged. */
    public synchronized long total() {
        return next;
    }
}
