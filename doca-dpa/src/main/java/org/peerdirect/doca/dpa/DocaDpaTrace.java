package org.peerdirect.doca.dpa;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevTrace.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioProcess;

/**
 * The device trace of a {@link DocaDpa} context ({@code doca_dpa_trace_file_set_path},
 * {@code doca_dpa_dev_trace}, {@code doca_dpa_dev_trace_flush}): the trace area in the DPA heap
 * ({@link org.peerdirect.doca.dpa.dev.DocaDpaDevTrace}, made at start) that the library writes to
 * the configured file (appended) or standard output when the context stops.
 *
 * <p>Format ours (DOCA does not document its trace output): one line per record sent, the five
 * values as {@code 0x}-prefixed 16-digit hex separated by spaces, in the order they were traced;
 * then, when records were dropped or never sent, one line starting with {@code #} saying how many.
 * [model] The host reads the area once, at stop (DOCA's trace flush is "intended at end of run"):
 * a program tracing more than {@link #CAPACITY} records loses the rest, counted
 * ({@link DocaDpa#traceDropped}).
 *
 * <p>Lock: the setter and {@link #open}/{@link #drain} run under the context's lock.
 */
final class DocaDpaTrace {

    /** Records a buffer holds (sent to the host when full). */
    static final int BUFFER_RECORDS = 64;
    /** Records the trace area holds: 16 buffers. */
    static final int CAPACITY = 16 * BUFFER_RECORDS;

    private Path path;
    private long desc;
    private long records;
    /** What the last drain read: records dropped (full area) and written but never sent. */
    private long dropped;
    private long unsent;

    /** {@code doca_dpa_trace_file_set_path}; INVALID_VALUE for no path. */
    void setPath(String path) {
        DocaException.check(path != null && !path.isEmpty(), DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_trace_file_set_path: no path");
        this.path = Path.of(path);
    }

    /** The area in {@code process}'s heap, empty (start). */
    void open(FlexioProcess process) throws FlexioException {
        records = process.bufDevAlloc((long) RECORD_SIZE * CAPACITY);
        try {
            desc = process.bufDevAlloc(DESC_SIZE);
        } catch (FlexioException e) {
            process.bufDevFree(records);
            records = 0;
            throw e;
        }
        process.bufDevMemset(0, DESC_SIZE, desc);
        process.host2devMemcpy(ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN).putInt(OFF_CAPACITY, CAPACITY)
                .putInt(OFF_BUF_RECORDS, BUFFER_RECORDS).putLong(OFF_RECORDS, records).array(), desc);
        dropped = 0;
        unsent = 0;
    }

    /** The area's DPA address (the runtime block's {@code OFF_TRACE}); 0 when not started. */
    long daddr() {
        return desc;
    }

    /**
     * Writes every record sent to the file or standard output, then the counts line if any was
     * lost (stop, before the process goes). A process in error still has its heap: a copy the
     * NIC refuses is reported on standard error, and the trace is lost.
     */
    void drain(FlexioProcess process) {
        if (desc == 0) {
            return;
        }
        try {
            ByteBuffer d = ByteBuffer.wrap(process.dev2hostMemcpy(desc, 32)).order(ByteOrder.LITTLE_ENDIAN);
            int written = d.getInt(OFF_WRITTEN);
            int sent = Math.min(d.getInt(OFF_SENT), CAPACITY);
            dropped = d.getLong(OFF_DROPPED);
            unsent = written - sent;
            StringBuilder out = new StringBuilder();
            if (sent > 0) {
                ByteBuffer r = ByteBuffer.wrap(process.dev2hostMemcpy(records, RECORD_SIZE * sent)).order(ByteOrder.LITTLE_ENDIAN);
                for (int i = 0; i < sent; i++) {
                    for (int k = 0; k < 5; k++) {
                        out.append(k == 0 ? "" : " ").append(String.format("0x%016x", r.getLong(RECORD_SIZE * i + 8 * k)));
                    }
                    out.append(System.lineSeparator());
                }
            }
            if (dropped != 0 || unsent != 0) {
                out.append("# doca_dpa trace: ").append(dropped).append(" record(s) dropped (the trace buffer was full), ").append(unsent)
                        .append(" not sent (no doca_dpa_dev_trace_flush)").append(System.lineSeparator());
            }
            print(out.toString());
        } catch (RuntimeException e) {
            System.err.println("doca_dpa trace: the trace area could not be read: " + e.getMessage());
        } finally {
            desc = 0; // the area goes with the process
            records = 0;
        }
    }

    /** Records dropped for a full area, as the last drain read them. */
    long dropped() {
        return dropped;
    }

    /** Records written but never sent (no full buffer, no flush), as the last drain read them. */
    long unsent() {
        return unsent;
    }

    private void print(String text) {
        if (text.isEmpty()) {
            return;
        }
        Path p = path;
        if (p == null) {
            System.out.print(text);
            return;
        }
        try {
            Files.writeString(p, text, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            System.err.println("doca_dpa trace: " + p + ": " + e.getMessage());
        }
    }
}
