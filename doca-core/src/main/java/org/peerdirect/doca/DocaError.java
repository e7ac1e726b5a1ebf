package org.peerdirect.doca;

/**
 * {@code doca_error_t} ({@code doca_error.h}): the status every DOCA call returns. Names and values
 * are DOCA's; {@link #getName} and {@link #getDescr} are {@code doca_error_get_name} and
 * {@code doca_error_get_descr}. A Java call that fails throws {@link DocaException} carrying one of
 * these (never {@link #DOCA_SUCCESS}).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core</a>
 */
public enum DocaError {
    DOCA_SUCCESS(0, "Success"),
    DOCA_ERROR_UNKNOWN(1, "Unknown error"),
    DOCA_ERROR_NOT_PERMITTED(2, "Operation not permitted"),
    DOCA_ERROR_IN_USE(3, "Resource already in use"),
    DOCA_ERROR_NOT_SUPPORTED(4, "Operation not supported"),
    DOCA_ERROR_AGAIN(5, "Resource temporarily unavailable, try again"),
    DOCA_ERROR_INVALID_VALUE(6, "Invalid input"),
    DOCA_ERROR_NO_MEMORY(7, "Memory allocation failure"),
    DOCA_ERROR_INITIALIZATION(8, "Resource initialization failure"),
    DOCA_ERROR_TIME_OUT(9, "Timer expired waiting for resource"),
    DOCA_ERROR_SHUTDOWN(10, "Shut down in process or completed"),
    DOCA_ERROR_CONNECTION_RESET(11, "Connection reset by peer"),
    DOCA_ERROR_CONNECTION_ABORTED(12, "Connection aborted"),
    DOCA_ERROR_CONNECTION_INPROGRESS(13, "Connection in progress"),
    DOCA_ERROR_NOT_CONNECTED(14, "Not Connected"),
    DOCA_ERROR_NO_LOCK(15, "Unable to acquire required lock"),
    DOCA_ERROR_NOT_FOUND(16, "Resource Not Found"),
    DOCA_ERROR_IO_FAILED(17, "Input/Output Operation Failed"),
    DOCA_ERROR_BAD_STATE(18, "Bad State"),
    DOCA_ERROR_UNSUPPORTED_VERSION(19, "Unsupported version"),
    DOCA_ERROR_OPERATING_SYSTEM(20, "Operating system call failure"),
    DOCA_ERROR_DRIVER(21, "DOCA Driver call failure"),
    DOCA_ERROR_UNEXPECTED(22, "An unexpected scenario was detected"),
    DOCA_ERROR_ALREADY_EXIST(23, "Resource already exist"),
    DOCA_ERROR_FULL(24, "No more space in resource"),
    DOCA_ERROR_EMPTY(25, "No entry is available in resource"),
    DOCA_ERROR_IN_PROGRESS(26, "Operation is in progress"),
    DOCA_ERROR_TOO_BIG(27, "Requested operation too big to be contained"),
    DOCA_ERROR_AUTHENTICATION(28, "Authentication failure"),
    DOCA_ERROR_BAD_CONFIG(29, "Configuration is not valid"),
    DOCA_ERROR_SKIPPED(30, "Operation was skipped"),
    DOCA_ERROR_DEVICE_FATAL_ERROR(31, "Device fatal error");

    private static final DocaError[] BY_VALUE = values();

    private final int value;
    private final String descr;

    DocaError(int value, String descr) {
        this.value = value;
        this.descr = descr;
    }

    /** The numeric {@code doca_error_t} value. */
    public int value() {
        return value;
    }

    /** {@code doca_error_get_name}: the enumerator's name, e.g. {@code DOCA_ERROR_BAD_STATE}. */
    public String getName() {
        return name();
    }

    /**
     * {@code doca_error_get_descr}: a short description: the header's comment for values 0 to 27;
     * for 28 to 31, whose comments we have not seen, ours [model].
     */
    public String getDescr() {
        return descr;
    }

    /** The error of numeric value {@code v}; {@link #DOCA_ERROR_UNKNOWN} for a value DOCA does not define. */
    public static DocaError of(int v) {
        return v >= 0 && v < BY_VALUE.length ? BY_VALUE[v] : DOCA_ERROR_UNKNOWN;
    }
}
