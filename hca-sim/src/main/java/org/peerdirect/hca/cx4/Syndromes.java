package org.peerdirect.hca.cx4;

/**
 * The model's command syndromes: each names the check that failed. Firmware syndromes have no
 * generic meaning (the driver logs them); the model's are {@code 0x0badNNNN}: {@code 0x00NN} the
 * firmware's own checks, {@code 0x01NN} the data-path objects', {@code 0x02NN} the page-fault unit's.
 */
final class Syndromes {

    private Syndromes() {
    }

    static final int SYND_UNKNOWN_OPCODE = 0x0bad_0001;
    static final int SYND_BAD_STATE = 0x0bad_0002;
    static final int SYND_BAD_ISSI = 0x0bad_0003;
    static final int SYND_SHORT_OUTPUT = 0x0bad_0004;
    static final int SYND_SHORT_INPUT = 0x0bad_0005;
    static final int SYND_BAD_OP_MOD = 0x0bad_0006;
    static final int SYND_BAD_FUNCTION = 0x0bad_0007;
    static final int SYND_BAD_PAGE = 0x0bad_0008;
    static final int SYND_PAGES_MISSING = 0x0bad_0009;
    static final int SYND_PAGES_HELD = 0x0bad_000a;
    static final int SYND_OBJECTS_LIVE = 0x0bad_000b;
    static final int SYND_BAD_CAP = 0x0bad_000c;
    static final int SYND_NO_SUCH_OBJECT = 0x0bad_000d;
    static final int SYND_LIMIT = 0x0bad_000e;
    static final int SYND_BAD_EQ = 0x0bad_000f;
    static final int SYND_NO_PAGES = 0x0bad_0010;
    /** The header's uid names no user context, or the command takes none (DevX). */
    static final int SYND_BAD_UID = 0x0bad_0011;
    /** The command names an object of another uid (DevX ownership). */
    static final int SYND_WRONG_UID = 0x0bad_0012;
    /** {@code obj_type} names no general object type this device creates. */
    static final int SYND_BAD_OBJ_TYPE = 0x0bad_0013;

    // the data-path commands
    static final int SYND_BAD_CQ = 0x0bad_0101;
    static final int SYND_BAD_QP = 0x0bad_0102;
    static final int SYND_BAD_MKEY = 0x0bad_0103;
    /** The transport engine refused the object ({@link Refused#of}). */
    static final int SYND_ENGINE = 0x0bad_0104;
    static final int SYND_BAD_SRQ = 0x0bad_0105;
    /** A umem, or a queue's or mkey's place in one: too small, misaligned, not writable. */
    static final int SYND_BAD_UMEM = 0x0bad_0106;

    /** {@code PAGE_FAULT_RESUME} names no pending fault, or another one. */
    static final int SYND_BAD_RESUME = 0x0bad_0201;
}
