package org.peerdirect.mlx4.core;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.mlx4.jfr.Mlx4JfrEvents;

/**
 * The recent commands of one device ({@code mlx4:cmdlog}): a bounded ring, oldest dropped first.
 * Each record is one command as the driver saw it end: opcode, op_mod, input modifier, polled or
 * by event, the status, the latency from the go bit to the completion, or the driver's error
 * (timeout, device gone).
 *
 * <p>Thread-safe: appends and snapshots under this object's monitor (no I/O inside).
 */
public final class CmdLog {

    /** One finished command; {@code status} -1 when it has none (timed out, device gone). */
    public record Entry(long seq, int opcode, int opMod, int inMod, boolean events, int status, long latencyNanos, String error) {

        @Override
        public String toString() {
            String result = error != null ? error : String.format("status %s(0x%x)", Mlx4Cmd.statusName(status), status);
            return String.format("%5d %-14s op_mod 0x%-2x in_mod 0x%-6x %-5s %9.1f us  %s", seq, Mlx4Cmd.name(opcode), opMod, inMod,
                    events ? "event" : "poll", latencyNanos / 1e3, result);
        }
    }

    private final Entry[] ring;
    private long next;
    /** The bring-up's commands ({@code mlx4_load_one}), kept whole; closed once the device is up. */
    private final List<Entry> bringUp = new ArrayList<>();
    private boolean bringUpDone;

    /** The device's name, for the JFR event each command also is. */
    private final String device;

    public CmdLog(int capacity, String device) {
        ring = new Entry[capacity];
        this.device = device;
    }

    void add(int opcode, int opMod, int inMod, boolean events, int status, long latencyNanos, String error) {
        if (Mlx4JfrEvents.Command.on()) { // outside the monitor: the recorder may take its time
            Mlx4JfrEvents.Command.commit(device, Mlx4Cmd.name(opcode), opMod, inMod, events, status, latencyNanos, error);
        }
        synchronized (this) {
            Entry e = new Entry(next, opcode, opMod, inMod, events, status, latencyNanos, error);
            ring[(int) (next % ring.length)] = e;
            next++;
            if (!bringUpDone) {
                bringUp.add(e);
            }
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

    /** The bring-up is over: later commands go to the ring only. */
    synchronized void endBringUp() {
        bringUpDone = true;
    }

    /** The bring-up's commands, from QUERY_FW on. */
    public synchronized List<Entry> bringUp() {
        return List.copyOf(bringUp);
    }

    /** Commands ever logged. */
    public synchronized long total() {
        return next;
    }
}
