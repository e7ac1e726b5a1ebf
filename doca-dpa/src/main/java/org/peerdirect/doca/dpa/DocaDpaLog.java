package org.peerdirect.doca.dpa;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioMsgStream;
import org.peerdirect.flexio.FlexioProcess;

/**
 * The device log of a {@link DocaDpa} context ({@code doca_dpa_set_log_level},
 * {@code doca_dpa_log_file_set_path}): a FlexIO message stream of the context's process, whose
 * lines go to the configured file (appended) or standard output.
 *
 * <p>Lock: the setters and {@link #open}/{@link #closed} run under the context's lock (the
 * setters only before start); {@link #print} runs on FlexIO's stream thread and reads the path
 * set before start.
 */
final class DocaDpaLog {

    private int level = DocaDpaDev.LOG_LEVEL_INFO;
    private Path path;
    private FlexioMsgStream stream;

    /** {@code doca_dpa_set_log_level}: 10 disable .. 60 debug; INVALID_VALUE outside. */
    void setLevel(int level) {
        DocaException.check(level >= 10 && level <= 60, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_set_log_level: level " + level + " (10..60)");
        this.level = level;
    }

    /** {@code doca_dpa_log_file_set_path}; INVALID_VALUE for no path. */
    void setPath(String path) {
        DocaException.check(path != null && !path.isEmpty(), DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_log_file_set_path: no path");
        this.path = Path.of(path);
    }

    /** The stream in {@code process} at the configured level (start). */
    void open(FlexioProcess process) throws FlexioException {
        stream = FlexioMsgStream.create(process, new FlexioMsgStream.Attr(1 << 14, FlexioMsgStream.SyncMode.SYNC, "doca_dpa",
                DocaDpaDev.flexioLevel(level)), this::print);
    }

    /** The process was destroyed, the stream with it (stop). */
    void closed() {
        stream = null;
    }

    /** The stream's DPA address (the runtime block's {@code OFF_LOG_STREAM}); 0 when not started. */
    long daddr() {
        FlexioMsgStream l = stream;
        return l == null ? 0 : l.daddr();
    }

    /** One line of the device log: to the file of {@link #setPath}, else standard output (best effort, as DOCA's). */
    private void print(String line) {
        Path p = path;
        if (p == null) {
            System.out.println(line);
            return;
        }
        try {
            Files.writeString(p, line + System.lineSeparator(), StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            System.err.println("doca_dpa device log: " + p + ": " + e.getMessage() + ": " + line);
        }
    }
}
