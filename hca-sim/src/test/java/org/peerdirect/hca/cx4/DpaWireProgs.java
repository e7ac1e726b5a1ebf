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
     * The FlexIO event handler's shape: reads CQE number {@code n} (the activation count, its
     * consumer index) of its CQ's ring in host memory through a window (+8 window id, +24 mkey, +40
     * the ring's address), keeps its {@code op_own} and immediate at +64 + 8 * (n % 8), writes back,
     * arms the CQ with the index after it, reschedules. A CQE already past that index fires the arm
     * at once, which re-runs the handler: one activation per completion.
     */
    public static void readCqe(long arg) {
        config(arg);
        long n = Dpa.amoAdd64(arg + 32, 1);
        if (n == 0 && Dpa.windowConfig(Dpa.WINDOW_ENTITY_0, (int) Dpa.ld64(arg + 8), (int) Dpa.ld64(arg + 24)) != 0) {
            Dpa.error(0x82);
        }
        Dpa.windowReadInv(); // the NIC wrote the CQE since the last activation
        long cqe = Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_0, Dpa.ld64(arg + 40) + (n & 63) * 64);
        long opOwn = Dpa.ld8(cqe + 63);
        long imm = Dpa.ld32(cqe + 0x24) & 0xffffffffL;
        Dpa.st64(arg + 64 + 8 * (n & 7), opOwn << 32 | imm);
        Dpa.memoryWriteback();
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
