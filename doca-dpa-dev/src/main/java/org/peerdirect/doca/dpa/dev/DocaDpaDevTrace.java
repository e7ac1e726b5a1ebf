package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev_trace(arg1..arg5)} and {@code doca_dpa_dev_trace_flush()}: five 64-bit values
 * per record into the DPA context's trace buffer, which the host library writes to the file of
 * {@code doca_dpa_trace_file_set_path} (else standard output).
 *
 * <p>DOCA documents: "As soon as a buffer is fully occupied it is internally sent to host, however
 * user can ask partially occupied buffer to be sent to host" ({@code trace_flush}, "intended use is
 * at end of run"). [model] The trace area is in the DPA heap, written by the host library at
 * {@code doca_dpa_start}, little-endian: records written {@link #OFF_WRITTEN} (u32), records sent
 * {@link #OFF_SENT} (u32: a whole buffer of {@link #OFF_BUF_RECORDS} records when it fills, every
 * record written on a flush), the capacity in records {@link #OFF_CAPACITY} (u32), records dropped
 * {@link #OFF_DROPPED} (u64), the records' address {@link #OFF_RECORDS} (u64; {@link #RECORD_SIZE}
 * bytes each, the five values in order), and a spinlock in a line of its own ({@link #OFF_LOCK}:
 * the host never reads it). Best effort, as DOCA's device printing: a record arriving when the
 * area is full is dropped and counted; records never sent (no full buffer, no flush) are not
 * written out. The host reads the area when the context stops (the trace's end of run).
 *
 * <p>Where a thread finds the area: the runtime's block ({@link DocaDpaDev#OFF_TRACE}); a thread
 * without one (an RPC) traces nothing, as it logs nothing. Several threads may trace at once (the
 * spinlock orders them). Memory model: each record and the counters are written back
 * ({@code __dpa_thread_memory_writeback}) before the lock is released, so the host's read (a NIC
 * read of DPA memory) never sees bytes still in a hart's write buffer.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_dev_trace, doca_dpa_dev_trace_flush</a>
 */
public final class DocaDpaDevTrace {

    public static final int OFF_WRITTEN = 0;
    public static final int OFF_SENT = 4;
    public static final int OFF_CAPACITY = 8;
    public static final int OFF_BUF_RECORDS = 12;
    public static final int OFF_DROPPED = 16;
    public static final int OFF_RECORDS = 24;
    /** The spinlock, in the descriptor's second 64-byte line. */
    public static final int OFF_LOCK = 64;
    /** Bytes of the trace descriptor. */
    public static final int DESC_SIZE = 128;
    /** Bytes of a record: five u64. */
    public static final int RECORD_SIZE = 40;

    private DocaDpaDevTrace() {
    }

    /** {@code doca_dpa_dev_trace(arg1, arg2, arg3, arg4, arg5)}: one record, best effort (see the class comment). */
    public static void trace(long arg1, long arg2, long arg3, long arg4, long arg5) {
        long t = area();
        if (t == 0) {
            return;
        }
        FlexioDev.spinLock(t + OFF_LOCK);
        int w = Dpa.ld32(t + OFF_WRITTEN);
        if (w >= Dpa.ld32(t + OFF_CAPACITY)) {
            Dpa.st64(t + OFF_DROPPED, Dpa.ld64(t + OFF_DROPPED) + 1);
        } else {
            long r = Dpa.ld64(t + OFF_RECORDS) + (long) RECORD_SIZE * w;
            Dpa.st64(r, arg1);
            Dpa.st64(r + 8, arg2);
            Dpa.st64(r + 16, arg3);
            Dpa.st64(r + 24, arg4);
            Dpa.st64(r + 32, arg5);
            w++;
            Dpa.st32(t + OFF_WRITTEN, w);
            if (w % Dpa.ld32(t + OFF_BUF_RECORDS) == 0) {
                Dpa.st32(t + OFF_SENT, w); // a full buffer goes to the host
            }
        }
        Dpa.memoryWriteback(); // the record and the counters before another thread (or the host) may read them
        FlexioDev.spinUnlock(t + OFF_LOCK);
    }

    /** {@code doca_dpa_dev_trace_flush()}: every record written so far is sent, the partial buffer too. */
    public static void traceFlush() {
        long t = area();
        if (t == 0) {
            return;
        }
        FlexioDev.spinLock(t + OFF_LOCK);
        Dpa.st32(t + OFF_SENT, Dpa.ld32(t + OFF_WRITTEN));
        Dpa.memoryWriteback();
        FlexioDev.spinUnlock(t + OFF_LOCK);
    }

    /** The calling thread's trace area, or 0 (no runtime block: an RPC; or no area). */
    private static long area() {
        long tls = FlexioDev.getThreadLocalStorage();
        return tls == 0 ? 0 : Dpa.ld64(tls + DocaDpaDev.OFF_TRACE);
    }
}
