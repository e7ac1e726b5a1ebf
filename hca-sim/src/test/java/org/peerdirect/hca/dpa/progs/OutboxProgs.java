package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of the outbox and memory-model tests, with the few {@code flexio_dev} queue calls it
 * needs written over the ISA as the device library will write them. {@code arg} layout: +0 outbox
 * id, +8 queue number, +16 CQ number, +24 consumer index, +32 counter, +40 WQE ring, +48 value.
 */
public final class OutboxProgs {

    static final int CQ_DB = 0x100;
    static final int EQ_DB_NO_REARM = 0x180;
    static final int SXD_DB = 0x1c0;
    static final int RXT_DB = 0x280;

    private OutboxProgs() {
    }

    /** {@code flexio_dev_cq_arm(ci, cqn)}. */
    static void cqArm(int ci, int cqn) {
        Dpa.st64(Dpa.threadCtx().outboxBase() + CQ_DB, (cqn & 0xffffffL) | (long) (ci & 0xffffff) << 32);
    }

    /** {@code flexio_dev_qp_sq_ring_db(pi, qnum)}. */
    static void sqRingDb(int pi, int qn) {
        Dpa.st64(Dpa.threadCtx().outboxBase() + SXD_DB, (pi & 0xffffL) | (long) (qn & 0xffffff) << 32);
    }

    /** {@code flexio_dev_zcqe_gen(cqn)}. */
    static void zcqeGen(int cqn) {
        Dpa.st64(Dpa.threadCtx().outboxBase() + RXT_DB, cqn & 0xffffffL);
    }

    /** {@code flexio_dev_eq_update_ci(ci, eqn)}. */
    static void eqUpdateCi(int ci, int eqn) {
        Dpa.st64(Dpa.threadCtx().outboxBase() + EQ_DB_NO_REARM, (eqn & 0xffffffL) | (long) (ci & 0x3ffffff) << 32);
    }

    static void config(long arg) {
        if (Dpa.outboxConfig((int) Dpa.ld64(arg)) != 0) {
            Dpa.error(0x81);
        }
    }

    /** Rings each doorbell once. */
    public static void allDoorbells(long arg) {
        config(arg);
        sqRingDb(0x1234, (int) Dpa.ld64(arg + 8));
        cqArm(0x56, (int) Dpa.ld64(arg + 16));
        eqUpdateCi(0x78, 9);
        zcqeGen((int) Dpa.ld64(arg + 16));
        Dpa.finish();
    }

    /** Rings an SQ doorbell on the queue at +8 (a foreign one in the isolation test), then counts. */
    public static void ringOnce(long arg) {
        config(arg);
        sqRingDb(1, (int) Dpa.ld64(arg + 8));
        Dpa.amoAdd64(arg + 32, 1);
        Dpa.finish();
    }

    /** {@code flexio_dev_msix_send} on the CQ at +16: a zero CQE that triggers that CQ's thread. */
    public static void zcqe(long arg) {
        config(arg);
        zcqeGen((int) Dpa.ld64(arg + 16));
        Dpa.finish();
    }

    /** Rings without configuring an outbox. */
    public static void noOutbox(long arg) {
        sqRingDb(1, 5);
        Dpa.finish();
    }

    /** A 32-bit store to the outbox. */
    public static void narrowOutbox(long arg) {
        config(arg);
        Dpa.st32(Dpa.threadCtx().outboxBase() + SXD_DB, 1);
        Dpa.finish();
    }

    /** Configures the outbox id at +0 and stores the result at +32. */
    public static void tryConfig(long arg) {
        Dpa.st64(arg + 32, Dpa.outboxConfig((int) Dpa.ld64(arg)));
        Dpa.st64(arg + 40, Dpa.resetErrno());
        Dpa.finish();
    }

    /**
     * The drain–arm–reschedule pattern: counts the activation, posts a send (whose completion the
     * NIC writes to this thread's CQ before the arm), arms with the consumer index it drained to,
     * reschedules. The second activation only counts.
     */
    public static void drainArm(long arg) {
        config(arg);
        long n = Dpa.amoAdd64(arg + 32, 1);
        if (n == 0) {
            sqRingDb(1, (int) Dpa.ld64(arg + 8));
        }
        cqArm((int) (Dpa.ld64(arg + 24) + n), (int) Dpa.ld64(arg + 16));
        Dpa.reschedule();
    }

    /** The C7 mutant: reschedules without arming its CQ. */
    public static void noArm(long arg) {
        config(arg);
        Dpa.amoAdd64(arg + 32, 1);
        Dpa.reschedule();
    }

    /** Writes a WQE word to the ring slot 0, [write-back,] rings the send doorbell. */
    public static void postNoWriteback(long arg) {
        config(arg);
        Dpa.st64(Dpa.ld64(arg + 40), Dpa.ld64(arg + 48));
        sqRingDb(1, (int) Dpa.ld64(arg + 8));
        Dpa.finish();
    }

    public static void postFenceOnly(long arg) {
        config(arg);
        Dpa.st64(Dpa.ld64(arg + 40), Dpa.ld64(arg + 48));
        Dpa.memoryFence(Dpa.W, Dpa.W);
        sqRingDb(1, (int) Dpa.ld64(arg + 8));
        Dpa.finish();
    }

    public static void post(long arg) {
        config(arg);
        Dpa.st64(Dpa.ld64(arg + 40), Dpa.ld64(arg + 48));
        Dpa.memoryWriteback();
        sqRingDb(1, (int) Dpa.ld64(arg + 8));
        Dpa.finish();
    }
}
