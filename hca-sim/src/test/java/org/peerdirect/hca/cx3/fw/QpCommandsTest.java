package org.peerdirect.hca.cx3.fw;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.function.Consumer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.CqContext;
import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Mtt;
import org.peerdirect.hca.cx3.ifc.QpContext;

/**
 * The QP's life as the device sees it: no command at allocation, the QP created at
 * {@code RST2INIT_QP} from the context in the mailbox, each bad field of that context refused with
 * the status {@code mlx4_status_to_errno} knows (and nothing created), {@code QUERY_QP} reading
 * what the device holds, {@code 2RST_QP} giving the QP back. Driven from the driver's side only
 * ({@link HcrHarness}).
 */
class QpCommandsTest {

    @TempDir
    Path tmp;

    private static final int CQN = 100;
    private static final int QPN = 0x80;

    private static int run(HcrHarness h, int op, long in, int inMod, long out) {
        return h.run(op, 0, in, inMod, out, Hcr.POLL_TOKEN, false);
    }

    /** MTT entry {@code index} names a fresh page. */
    private static HcrHarness.Page mttPage(HcrHarness h, int index) {
        HcrHarness.Page p = h.page();
        HcrHarness.Page box = h.page();
        box.mem().set(BE64, Mtt.WRITE_START, index);
        box.mem().set(BE64, Mtt.WRITE_ENTRIES, p.iova() | Mtt.PRESENT);
        h.ok(Mlx4Cmd.WRITE_MTT, 0, box.iova(), 1, 0);
        return p;
    }

    /**
     * An RC QP's RST2INIT mailbox: 4 send WQEs of 64 bytes and 4 receive WQEs of 16 in the page of
     * MTT entry 2, the doorbell record at {@code db}, both CQs {@link #CQN}, PD 1, UAR page 1, port 1;
     * then {@code change} applied to the context.
     */
    private static HcrHarness.Page context(HcrHarness h, long db, Consumer<MemorySegment> change) {
        HcrHarness.Page box = h.page();
        MemorySegment x = box.mem().asSlice(QpContext.CONTEXT);
        x.set(BE32, QpContext.FLAGS, QpContext.STATE_INIT << 28 | QpContext.ST_RC << 16);
        x.set(BE32, QpContext.PD, 1);
        x.set(U8, QpContext.MTU_MSGMAX, (byte) (5 << 5 | 31));
        x.set(U8, QpContext.SQ_SIZE_STRIDE, (byte) (2 << 3 | 2));
        x.set(U8, QpContext.RQ_SIZE_STRIDE, (byte) (2 << 3));
        x.set(BE32, QpContext.USR_PAGE, 1);
        x.set(BE32, QpContext.LOCAL_QPN, QPN);
        x.set(BE32, QpContext.CQN_SEND, CQN);
        x.set(BE32, QpContext.CQN_RECV, CQN);
        x.set(BE64, QpContext.DB_REC_ADDR, db);
        x.set(BE32, QpContext.MTT_BASE_ADDR_L, 2 * Mtt.ENTRY_SIZE);
        x.set(U8, QpContext.PRI_PATH + QpContext.PATH_SCHED_QUEUE, (byte) QpContext.schedQueue(1));
        change.accept(x);
        return box;
    }

    private static int state(HcrHarness h, HcrHarness.Page out) {
        h.ok(Mlx4Cmd.QUERY_QP, 0, 0, QPN, out.iova());
        return out.mem().get(BE32, QpContext.CONTEXT + QpContext.FLAGS) >>> 28;
    }

    @Test
    void rst2initCreatesTheQpFromItsContextAndRefusesABadOne() {
        try (HcrHarness h = new HcrHarness(tmp)) {
            h.bringUp(3);
            HcrHarness.Page db = h.page();
            HcrHarness.Page out = h.page();
            HcrHarness.Page cq = h.page();
            cq.mem().set(BE32, CqContext.LOGSIZE_USRPAGE, 7 << 24);
            cq.mem().set(U8, CqContext.COMP_EQN, (byte) HcrHarness.EQN);
            cq.mem().set(BE32, CqContext.MTT_BASE_ADDR_L, Mtt.ENTRY_SIZE);
            cq.mem().set(BE64, CqContext.DB_REC_ADDR, h.page().iova());
            mttPage(h, 1);
            h.ok(Mlx4Cmd.SW2HW_CQ, 0, cq.iova(), CQN, 0);

            assertEquals(QpContext.STATE_RST, state(h, out), "a QP number the device was never told of is in RESET");
            assertEquals(Mlx4Cmd.STAT_BAD_RESOURCE, run(h, Mlx4Cmd.RST2INIT_QP, context(h, db.iova(), x -> { }).iova(), QPN, 0),
                    "the buffer's MTT entry is not written");
            mttPage(h, 2);
            refused(h, db, Mlx4Cmd.STAT_BAD_RESOURCE, "CQ 7", x -> x.set(BE32, QpContext.CQN_SEND, 7));
            refused(h, db, Mlx4Cmd.STAT_BAD_RESOURCE, "SRQ 9", x -> {
                x.set(U8, QpContext.RQ_SIZE_STRIDE, (byte) 0);
                x.set(BE32, QpContext.SRQN, QpContext.SRQN_USE_SRQ | 9);
            });
            refused(h, db, Mlx4Cmd.STAT_BAD_PARAM, "PD 0", x -> x.set(BE32, QpContext.PD, 0));
            refused(h, db, Mlx4Cmd.STAT_BAD_SIZE, "2^15", x -> x.set(U8, QpContext.SQ_SIZE_STRIDE, (byte) (15 << 3 | 2)));
            refused(h, db, Mlx4Cmd.STAT_BAD_SIZE, "2048 bytes", x -> x.set(U8, QpContext.SQ_SIZE_STRIDE, (byte) (2 << 3 | 7)));
            refused(h, db, Mlx4Cmd.STAT_BAD_INDEX, "outside the MTT", x -> x.set(BE32, QpContext.MTT_BASE_ADDR_L, 1 << 30));
            refused(h, db, Mlx4Cmd.STAT_BAD_PARAM, "service type", x -> x.set(BE32, QpContext.FLAGS, 0x7 << 16));
            refused(h, db, Mlx4Cmd.STAT_BAD_PARAM, "doorbell record", x -> x.set(BE64, QpContext.DB_REC_ADDR, db.iova() + 2));
            assertEquals(QpContext.STATE_RST, state(h, out), "nothing was created by a refused context");
            assertTrue(h.board.describe().contains("QPs 0"), h.board.describe());

            h.ok(Mlx4Cmd.RST2INIT_QP, 0, context(h, db.iova(), x -> { }).iova(), QPN, 0);
            assertEquals(QpContext.STATE_INIT, state(h, out));
            assertEquals(1, out.mem().get(BE32, QpContext.CONTEXT + QpContext.PD));
            assertEquals(1, h.board.silicon().qps().size(), "the device's QP, at the driver's number");
            assertEquals(QPN, h.board.silicon().qps().get(0).qpn());
            assertTrue(h.board.describe().contains("QPs 1"), h.board.describe());
            assertEquals(Mlx4Cmd.STAT_BAD_QP_STATE, run(h, Mlx4Cmd.RST2INIT_QP, context(h, db.iova(), x -> { }).iova(), QPN, 0));
            assertEquals(Mlx4Cmd.STAT_RESOURCE_BUSY, run(h, Mlx4Cmd.HW2SW_CQ, 0, CQN, 0), "the QP uses the CQ");

            h.ok(Mlx4Cmd.TWO_RST_QP, 2, 0, QPN, 0);
            assertEquals(QpContext.STATE_RST, state(h, out), "2RST_QP gave the QP back");
            assertEquals(0, h.board.silicon().qps().size());
            h.ok(Mlx4Cmd.HW2SW_CQ, 0, 0, CQN, 0);
            assertEquals(Mlx4Cmd.STAT_BAD_RESOURCE, run(h, Mlx4Cmd.QUERY_QP, 0, 5, out.iova()), "a reserved QP number");
        }
    }

    private static void refused(HcrHarness h, HcrHarness.Page db, int status, String why, Consumer<MemorySegment> change) {
        assertEquals(Mlx4Cmd.statusName(status), Mlx4Cmd.statusName(run(h, Mlx4Cmd.RST2INIT_QP, context(h, db.iova(), change).iova(), QPN, 0)),
                why + ": " + h.board.lastRefusal());
        assertTrue(h.board.lastRefusal().contains(why), h.board.lastRefusal());
    }
}
