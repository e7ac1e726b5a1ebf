package org.peerdirect.dpa.samples;

import java.util.Locale;

import org.peerdirect.flexio.FlexioStatus;

/** A sample's printout, line by line, as the C sample's {@code printf}s make it. Not thread-safe: one sample's thread writes it. */
final class Out {

    private final StringBuilder b = new StringBuilder();

    void line(String format, Object... args) {
        b.append(String.format(Locale.ROOT, format, args)).append('\n');
    }

    /** {@code flexio_err_status}'s C name. */
    static String errStatus(int s) {
        return switch (s) {
            case FlexioStatus.ERR_NO_ERROR -> "FLEXIO_ERR_STATUS_NO_ERROR";
            case FlexioStatus.ERR_FATAL_ERROR -> "FLEXIO_ERR_STATUS_FATAL_ERROR";
            case FlexioStatus.ERR_USER_ERROR -> "FLEXIO_ERR_STATUS_USER_ERROR";
            default -> "flexio_err_status " + s;
        };
    }

    @Override
    public String toString() {
        return b.toString().stripTrailing();
    }
}
