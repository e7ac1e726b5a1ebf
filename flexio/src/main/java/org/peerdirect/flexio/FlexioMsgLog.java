package org.peerdirect.flexio;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What the host received on each message stream ({@code dpa:msg}): per stream its process, name,
 * mode and level, the lines counted and the last {@link #KEEP} of them, its overruns, and whether
 * it was destroyed. Live streams and the last {@link #KEEP_DESTROYED} destroyed ones are kept, so a
 * sample's lines can be read after it ended. A lab record of the host library's consumer side,
 * written where the host prints a line (the device and the ring are not touched).
 *
 * <p>Thread-safe: the registry and each journal are guarded by the registry's monitor (a journal
 * is written by its stream's reader, read by the command).
 */
public final class FlexioMsgLog {

    /** Lines kept per stream. */
    public static final int KEEP = 256;
    /** Destroyed streams kept. */
    public static final int KEEP_DESTROYED = 32;

    private static final Set<Journal> STREAMS = new LinkedHashSet<>();

    private FlexioMsgLog() {
    }

    /** One stream's record. */
    static final class Journal {
        final int processId;
        final String app;
        final String host;
        final String name;
        final FlexioMsgStream.Attr attr;
        final ArrayDeque<String> last = new ArrayDeque<>();
        long lines;
        long overruns;
        boolean destroyed;

        Journal(FlexioProcess p, FlexioMsgStream.Attr attr) {
            this.processId = p.id();
            this.app = p.app.name();
            this.host = p.ctx.process().name() + " (pid " + p.ctx.process().pid() + ")";
            this.name = attr.name();
            this.attr = attr;
        }
    }

    static Journal open(FlexioProcess p, FlexioMsgStream.Attr attr) {
        Journal j = new Journal(p, attr);
        synchronized (STREAMS) {
            STREAMS.add(j);
        }
        return j;
    }

    static void line(Journal j, String line) {
        synchronized (STREAMS) {
            j.lines++;
            if (j.last.size() == KEEP) {
                j.last.removeFirst();
            }
            j.last.addLast(line);
        }
    }

    static void overruns(Journal j, long total) {
        synchronized (STREAMS) {
            j.overruns = total;
        }
    }

    /** The stream went; the oldest destroyed streams beyond {@link #KEEP_DESTROYED} are forgotten. */
    static void closed(Journal j) {
        synchronized (STREAMS) {
            j.destroyed = true;
            long destroyed = STREAMS.stream().filter(s -> s.destroyed).count();
            for (Iterator<Journal> it = STREAMS.iterator(); it.hasNext() && destroyed > KEEP_DESTROYED; ) {
                if (it.next().destroyed) {
                    it.remove();
                    destroyed--;
                }
            }
        }
    }

    /**
     * {@code dpa:msg}: each stream (of DPA process {@code processId}, or all for -1), oldest first,
     * with its last {@code n} lines as the host received them.
     */
    public static List<String> describe(int n, int processId) {
        if (n < 0) {
            throw new IllegalArgumentException("-n " + n + ": a number of lines, 0 or more");
        }
        List<String> out = new ArrayList<>();
        synchronized (STREAMS) {
            for (Journal j : STREAMS) {
                if (processId >= 0 && j.processId != processId) {
                    continue;
                }
                out.add(String.format("process %d (app %s, host %s) stream %s: %s level %d, %d line(s) received, %d byte(s) overrun%s",
                        j.processId, j.app, j.host, j.name, j.attr.syncMode(), j.attr.level(), j.lines, j.overruns,
                        j.destroyed ? ", destroyed" : ""));
                int skip = Math.max(0, j.last.size() - n);
                j.last.stream().skip(skip).forEach(l -> out.add("  " + l));
            }
        }
        if (out.isEmpty()) {
            out.add(processId < 0 ? "no message stream (flexio_msg_stream_create) received anything yet"
                    : "no message stream of DPA process " + processId);
        }
        return out;
    }
}
