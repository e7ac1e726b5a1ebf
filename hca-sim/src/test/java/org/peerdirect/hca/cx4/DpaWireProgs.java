package org.peerdirect.hca.cx4;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@link DpaWireTest}, with the {@code flexio_dev} outbox calls it needs written
 * over the ISA. {@code arg} layout: +0 outbox id, +8 a foreign CQ, +16 the thread's CQ, +32
 * activation counter.
 */
public final class DpaWireProgs {

    static final int CQ_DB = 0x100;

    private DpaWireProgs() {
    }

    /** {@code flexio_dev_cq_arm(ci, cqn)}. */
    static void cqArm(int ci, int cqn) {
        Dpa.st64(Dpa.threadCtx().outboxBase() + CQ_DB, (cqn & 0xffffffL) | (long) (ci & 0xffffff) << 32);
    }

    static void config(long arg) {
        if (Dpa.outboxConfig((int) Dpa.ld64(arg)) != 0) {
            Dpa.error(0x81);
        }
    }

    /**
     * The FlexIO event handler's shape: one CQE consumed per activation (the counter is its
     * consumer index), the CQ armed with the index after it, reschedule. A CQE already past that
     * index fires the arm at once, which re-runs the handler: one activation per completion.
     */
    public static void countArm(long arg) {
        config(arg);
        long n = Dpa.amoAdd64(arg + 32, 1);
        cqArm((int) n + 1, (int) Dpa.ld64(arg + 16));
        Dpa.reschedule();
    }

    /** Arms its own CQ (+16), counts, then arms the CQ at +8 (another uid's in the isolation test). */
    public static void armOwnThenForeign(long arg) {
        config(arg);
        cqArm(0, (int) Dpa.ld64(arg + 16));
        Dpa.amoAdd64(arg + 32, 1);
        cqArm(0, (int) Dpa.ld64(arg + 8));
        Dpa.finish();
    }
}
