package org.peerdirect.flexio;

/** {@code flexio_status} and {@code flexio_err_status} of {@code flexio.h}. */
public final class FlexioStatus {

    /** {@code FLEXIO_STATUS_SUCCESS}. */
    public static final int SUCCESS = 0;
    /** {@code FLEXIO_STATUS_FAILED}. */
    public static final int FAILED = 1;
    /** {@code FLEXIO_STATUS_TIMEOUT}. */
    public static final int TIMEOUT = 2;
    /** {@code FLEXIO_STATUS_FATAL_ERR}. */
    public static final int FATAL_ERR = 3;

    /** {@code FLEXIO_ERR_STATUS_NO_ERROR}. */
    public static final int ERR_NO_ERROR = 0;
    /** {@code FLEXIO_ERR_STATUS_FATAL_ERROR}: the RTOS or firmware ended the process (status 1..127 but 0x40). */
    public static final int ERR_FATAL_ERROR = 1;
    /** {@code FLEXIO_ERR_STATUS_USER_ERROR}: {@code flexio_dev_error} (status 0x80..0xff). */
    public static final int ERR_USER_ERROR = 2;

    private FlexioStatus() {
    }

    /** The {@code flexio_err_status} of a {@code dpa_process_status} (0 and 0x40, process finish, are no error). */
    public static int errStatusOf(int processStatus) {
        if (processStatus == 0 || processStatus == 0x40) {
            return ERR_NO_ERROR;
        }
        return processStatus >= 0x80 ? ERR_USER_ERROR : ERR_FATAL_ERROR;
    }
}
