package org.peerdirect.dpa.samples;

import java.time.LocalTime;
import java.util.Locale;

import org.peerdirect.doca.DocaError;

/**
 * DOCA's standard log backend as a sample prints through it ({@code doca_log_backend_create_standard}):
 * {@code [HH:MM:SS:micros][pid][DOCA][LEVEL][file:line][function] message}. The file and line are
 * those of the {@code DOCA_LOG_*} call in NVIDIA's C sample, so a reader holding the sample finds
 * each line's origin. Lines go to the sample's {@link Out}, which the device log's printer thread
 * also writes: {@link #line} is synchronized on it.
 */
final class DocaLog {

    private final Out out;
    private final int pid;

    DocaLog(Out out, int pid) {
        this.out = out;
        this.pid = pid;
    }

    /** {@code DOCA_LOG_INFO} at {@code file:line} in {@code func}. */
    void info(String file, int line, String func, String msg) {
        line("INF", file, line, func, msg);
    }

    /** {@code DOCA_LOG_ERR} at {@code file:line} in {@code func}. */
    void err(String file, int line, String func, String msg) {
        line("ERR", file, line, func, msg);
    }

    /** {@code DOCA_LOG_ERR(..."%s", doca_error_get_descr(e))}: the message, then DOCA's description of the error. */
    void err(String file, int line, String func, String msg, DocaError e) {
        err(file, line, func, msg + ": " + e.getDescr());
    }

    /** A line the program prints as it is (the device log's lines). */
    void raw(String text) {
        synchronized (out) {
            out.line("%s", text);
        }
    }

    private void line(String level, String file, int line, String func, String msg) {
        LocalTime t = LocalTime.now();
        String ts = String.format(Locale.ROOT, "%02d:%02d:%02d:%06d", t.getHour(), t.getMinute(), t.getSecond(), t.getNano() / 1000);
        synchronized (out) {
            out.line("[%s][%d][DOCA][%s][%s:%d][%s] %s", ts, pid, level, file, line, func, msg);
        }
    }
}
