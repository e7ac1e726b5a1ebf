package org.peerdirect.hca.cx3.fw;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.CqContext;
import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Mtt;

/**
 * {@code SW2HW_CQ} reads the ring's MTT and the doorbell record's address from the CQ context and
 * refuses what it cannot write to; {@code QUERY_CQ} reports a live CQ's size and status and
 * refuses one the device does not own. Driven from the driver's side only ({@link HcrHarness}).
 */
class CqCommandsTest {

    @TempDir
    Path tmp;

    private static final int CQN = 100;

    /** A CQ context of 128 CQEs (one page) whose ring is MTT entry 1, completions to the harness's EQ. */
    private static HcrHarness.Page context(HcrHarness h, long dbRec, int logPageSize) {
        HcrHarness.Page ctx = h.page();
        ctx.mem().set(BE32, CqContext.LOGSIZE_USRPAGE, 7 << 24);
        ctx.mem().set(U8, CqContext.COMP_EQN, (byte) HcrHarness.EQN);
        ctx.mem().set(U8, CqContext.LOG_PAGE_SIZE, (byte) logPageSize);
        ctx.mem().set(BE32, CqContext.MTT_BASE_ADDR_L, Mtt.ENTRY_SIZE); // entry 1
        ctx.mem().set(BE64, CqContext.DB_REC_ADDR, dbRec);
        return ctx;
    }

    private static int run(HcrHarness h, int op, long in, int inMod, long out) {
        return h.run(op, 0, in, inMod, out, Hcr.POLL_TOKEN, false);
    }

    @Test
    void sw2hwCqRefusesWhatItCannotWriteAndQueryCqReportsTheLiveOne() {
        try (HcrHarness h = new HcrHarness(tmp)) {
            h.bringUp(3);
            HcrHarness.Page db = h.page();
            HcrHarness.Page out = h.page();
            assertEquals(Mlx4Cmd.STAT_BAD_RESOURCE, run(h, Mlx4Cmd.SW2HW_CQ, context(h, db.iova(), 0).iova(), CQN, 0),
                    "the ring's MTT entry is not written yet");
            HcrHarness.Page ring = h.page();
            HcrHarness.Page mtt = h.page();
            mtt.mem().set(BE64, Mtt.WRITE_START, 1);
            mtt.mem().set(BE64, Mtt.WRITE_ENTRIES, ring.iova() | Mtt.PRESENT);
            h.ok(Mlx4Cmd.WRITE_MTT, 0, mtt.iova(), 1, 0);
            assertEquals(Mlx4Cmd.STAT_BAD_PARAM, run(h, Mlx4Cmd.SW2HW_CQ, context(h, db.iova(), 1).iova(), CQN, 0), "pages other than 4 KiB");
            assertTrue(h.board.lastRefusal().contains("4 KiB"), h.board.lastRefusal());
            assertEquals(Mlx4Cmd.STAT_BAD_PARAM, run(h, Mlx4Cmd.SW2HW_CQ, context(h, db.iova() + 4, 0).iova(), CQN, 0), "a misaligned record");
            assertTrue(h.board.lastRefusal().contains("doorbell record"), h.board.lastRefusal());
            assertEquals(Mlx4Cmd.STAT_BAD_RES_STATE, run(h, Mlx4Cmd.QUERY_CQ, 0, CQN, out.iova()), "no CQ yet");

            h.ok(Mlx4Cmd.SW2HW_CQ, 0, context(h, db.iova(), 0).iova(), CQN, 0);
            h.ok(Mlx4Cmd.QUERY_CQ, 0, 0, CQN, out.iova());
            assertEquals(CqContext.STATUS_OK, out.mem().get(BE32, CqContext.FLAGS) >>> CqContext.STATUS_SHIFT);
            assertEquals(7, out.mem().get(BE32, CqContext.LOGSIZE_USRPAGE) >>> 24 & 0x1f);
            assertEquals(0, out.mem().get(BE32, CqContext.PRODUCER_INDEX), "nothing written");
            assertTrue(h.board.describe().contains("CQs 1"), h.board.describe());

            h.ok(Mlx4Cmd.HW2SW_CQ, 0, 0, CQN, 0);
            assertEquals(Mlx4Cmd.STAT_BAD_RES_STATE, run(h, Mlx4Cmd.QUERY_CQ, 0, CQN, out.iova()), "given back");
        }
    }
}
