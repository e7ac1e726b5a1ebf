package org.peerdirect.hca.dpa;

/**
 * {@code dpa_process_status} values: 0 ok, 1..63 RTOS/firmware, 64..127 the SDK (0x40
 * {@code flexio_dev_process_finish}, 0x42 illegal user code), 128..255 user
 * ({@code flexio_dev_err.h}). The 1..63 codes are the model's ("peerdirect PRM extension v1"):
 * NVIDIA publishes the range, not its values.
 */
public final class ProcessStatus {

    public static final int OK = 0;
    /** An access outside the process's memory, windows and outbox. */
    public static final int ACCESS_FAULT = 0x01;
    /** An access not naturally aligned (check C5). */
    public static final int UNALIGNED = 0x02;
    /** An activation ran past the watchdog. */
    public static final int WATCHDOG = 0x03;
    /** The handler threw (a Java exception is the model's trap). */
    public static final int HANDLER_TRAP = 0x04;
    /** A window access through a revoked, invalid or too small mkey. */
    public static final int WINDOW_FAULT = 0x05;
    /** A doorbell on a queue of another process (strict outbox isolation). */
    public static final int OUTBOX_ISOLATION = 0x06;
    /** A memory-model check failed in strict mode. */
    public static final int MEMORY_MODEL = 0x07;
    /** An outbox write that is not a 64-bit store to a register, or no outbox configured. */
    public static final int OUTBOX_FAULT = 0x08;
    /** The process was destroyed by the host while threads ran. */
    public static final int DESTROYED = 0x09;
    /** {@code flexio_dev_process_finish}. */
    public static final int PROCESS_FINISH = 0x40;
    /** {@code FLEXIO_DEV_ERROR_ILLEGAL_ERR}: {@code flexio_dev_error} with a code outside 0x80..0xff. */
    public static final int ILLEGAL_ERR = 0x42;

    private ProcessStatus() {
    }

    /** {@code flexio_err_status_get}'s view: 0 no error, 1 fatal, 2 user error. */
    public static int errStatus(int status) {
        if (status == OK || status == PROCESS_FINISH) {
            return 0;
        }
        return status >= 0x80 ? 2 : 1;
    }
}
