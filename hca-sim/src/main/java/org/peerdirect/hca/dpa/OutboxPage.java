package org.peerdirect.hca.dpa;

/**
 * The outbox register page of an EU ({@code struct dpa_outbox9_u_page_le} of
 * {@code flexio_dev_dpa_arch.h}): 4 KiB of little-endian 64-bit registers. A 64-bit store to a
 * doorbell register decodes to a NIC doorbell on a queue of the configured outbox's uid; a
 * doorbell naming another uid's queue is dropped and counted and, with strict isolation, ends the
 * process (open question 3 of DPA_MODEL.md §6: the model chose the process error, because a
 * silent drop would let a broken handler spin forever unnoticed). Each EU has its own page at
 * {@code OUTBOX_BASE + eu * 4096}.
 */
final class OutboxPage {

    static final long OUTBOX_BASE = 1L << 50;
    static final int PAGE = 4096;

    static final int UCTL = 0x000;
    static final int BUFFER = 0x040;
    /** {@code cqn} 0..23, {@code cq_ci} 32..55: re-arm the CQ with its consumer index. */
    static final int CQ_DB = 0x100;
    static final int EQ_DB_REARM = 0x140;
    /** {@code eqn} 0..23, {@code eq_ci} 32..57. */
    static final int EQ_DB_NO_REARM = 0x180;
    /** {@code wqe_index} 0..15, {@code qp_or_sq} 32..55: send doorbell with the producer index. */
    static final int SXD_DB = 0x1c0;
    static final int EMU_CAP = 0x200;
    static final int EMU_CAP_TRIGGER = 0x240;
    /** {@code cqn} 0..23: a zero CQE on the CQ. */
    static final int RXT_DB = 0x280;
    static final int RXT_DONE0 = 0x2c0;
    static final int RXT_DONE1 = 0x2c8;
    static final int RXC_RD = 0x300;
    static final int CC_DB = 0x340;
    static final int SW_RESERVE = 0xfc0;

    private static final int M24 = 0xffffff;

    private OutboxPage() {
    }

    static long pageOf(int eu) {
        return OUTBOX_BASE + (long) eu * PAGE;
    }

    static boolean isOutbox(long daddr) {
        return daddr >= OUTBOX_BASE && daddr < OUTBOX_BASE + 256L * PAGE;
    }

    /** Decodes a 64-bit store at {@code offset} of the running thread's EU page into a NIC doorbell. */
    static void store(Runner r, int offset, long v) {
        DpaThread t = r.thread;
        DpaUnit unit = r.unit;
        if (t.outbox == null) {
            unit.fail(t.process, ProcessStatus.OUTBOX_FAULT, "doorbell at outbox offset 0x" + Integer.toHexString(offset)
                    + " with no outbox configured (flexio_dev_outbox_config) at " + Sites.here());
            return;
        }
        DpaEvents.Doorbell ev = DpaEvents.Doorbell.start();
        switch (offset) {
            case CQ_DB -> {
                int cqn = (int) v & M24;
                if (own(r, DpaNic.QueueKind.CQ, cqn, "CQ_DB")) {
                    unit.nic.cqArm(cqn, (int) (v >>> 32) & M24);
                    DpaEvents.Doorbell.done(ev, "CQ_DB", cqn);
                }
            }
            case SXD_DB -> {
                int qn = (int) (v >>> 32) & M24;
                if (own(r, DpaNic.QueueKind.SQ, qn, "SXD_DB")) {
                    unit.nic.sqDoorbell(qn, (int) v & 0xffff);
                    DpaEvents.Doorbell.done(ev, "SXD_DB", qn);
                }
            }
            case RXT_DB -> {
                int cqn = (int) v & M24;
                if (own(r, DpaNic.QueueKind.CQ, cqn, "RXT_DB")) {
                    unit.nic.zeroCqe(cqn);
                    DpaEvents.Doorbell.done(ev, "RXT_DB", cqn);
                }
            }
            case EQ_DB_NO_REARM -> {
                int eqn = (int) v & M24;
                if (own(r, DpaNic.QueueKind.EQ, eqn, "EQ_DB_NO_REARM")) {
                    unit.nic.eqUpdateCi(eqn, (int) (v >>> 32) & 0x3ffffff);
                    DpaEvents.Doorbell.done(ev, "EQ_DB_NO_REARM", eqn);
                }
            }
            default -> unit.unsupportedDoorbell(t.process);
        }
    }

    /** The isolation rule: the queue must be the outbox process's uid's. */
    private static boolean own(Runner r, DpaNic.QueueKind kind, int qn, String reg) {
        DpaProcess p = r.thread.process;
        int owner = r.unit.nic.ownerUid(kind, qn);
        if (owner == p.uid) {
            return true;
        }
        r.unit.foreignDoorbell(p, reg + " on " + kind + " 0x" + Integer.toHexString(qn)
                + (owner < 0 ? " (no such queue)" : " of uid " + owner) + " from process " + p.id + " (uid " + p.uid
                + ") at " + Sites.here());
        return false;
    }
}
