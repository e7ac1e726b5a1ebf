package org.peerdirect.hca.cx3.fw;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.EqContext;
import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.hca.cx3.ifc.IcmMap;
import org.peerdirect.hca.cx3.ifc.InitHca;
import org.peerdirect.hca.cx3.ifc.Mad;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.MptEntry;
import org.peerdirect.hca.cx3.ifc.Mtt;
import org.peerdirect.hca.cx3.ifc.Uar;

/**
 * Fuzzes the ConnectX-3 HCR from the driver's side only ({@link HcrHarness}): the device is
 * brought to a random level (reset, firmware running, HCA up, with an EQ taking command
 * completions), then each round throws random commands at it: known opcodes with random op_mods
 * and modifiers, unknown opcodes, input and output parameters that are mapped mailboxes of random
 * bytes or of plausible structures with random fields (map entries, INIT_HCA, EQ contexts, MPT
 * entries, WRITE_MTT, MADs), misaligned, unmapped or zero addresses, the event bit with random
 * tokens, plus noise: HCR words written without the go bit, EQ doorbells with random values,
 * writes to random UAR offsets, and now and then a chip reset. For every command: it completes
 * within the bound (the go bit clears and the toggle moves), its status is one
 * {@code mlx4_status_to_errno} knows, an unknown opcode is BAD_OP. After every round a NOP
 * succeeds; at the end the engine failed on nothing of its own and the audit is clean.
 *
 * <p>Short in CI (3 000 commands); the long form:
 * <pre>
 * mvn -o -q -pl hca-sim verify -Dtest=HcrFuzzTest -Dsurefire.failIfNoSpecifiedTests=false -Dcx3.fuzz.commands=1000000
 * </pre>
 * A failure names its seed; {@code -Dcx3.fuzz.seed=...} replays it.
 */
class HcrFuzzTest {

    static final Set<Integer> STATUSES = Set.of(Mlx4Cmd.STAT_OK, Mlx4Cmd.STAT_INTERNAL_ERR, Mlx4Cmd.STAT_BAD_OP, Mlx4Cmd.STAT_BAD_PARAM,
            Mlx4Cmd.STAT_BAD_SYS_STATE, Mlx4Cmd.STAT_BAD_RESOURCE, Mlx4Cmd.STAT_RESOURCE_BUSY, Mlx4Cmd.STAT_EXCEED_LIM,
            Mlx4Cmd.STAT_BAD_RES_STATE, Mlx4Cmd.STAT_BAD_INDEX, Mlx4Cmd.STAT_BAD_NVMEM, Mlx4Cmd.STAT_ICM_ERROR, Mlx4Cmd.STAT_BAD_QP_STATE,
            Mlx4Cmd.STAT_BAD_SEG_PARAM, Mlx4Cmd.STAT_REG_BOUND, Mlx4Cmd.STAT_LAM_NOT_PRE, Mlx4Cmd.STAT_BAD_PKT, Mlx4Cmd.STAT_BAD_SIZE,
            Mlx4Cmd.STAT_MULTI_FUNC_REQ);

    /** The opcodes the model executes, drawn most often. */
    static final int[] KNOWN = {Mlx4Cmd.QUERY_FW, Mlx4Cmd.MAP_FA, Mlx4Cmd.RUN_FW, Mlx4Cmd.UNMAP_FA, Mlx4Cmd.QUERY_DEV_CAP,
        Mlx4Cmd.QUERY_ADAPTER, Mlx4Cmd.SET_ICM_SIZE, Mlx4Cmd.MAP_ICM_AUX, Mlx4Cmd.UNMAP_ICM_AUX, Mlx4Cmd.MAP_ICM, Mlx4Cmd.UNMAP_ICM,
        Mlx4Cmd.INIT_HCA, Mlx4Cmd.CLOSE_HCA, Mlx4Cmd.INIT_PORT, Mlx4Cmd.CLOSE_PORT, Mlx4Cmd.MAD_IFC, Mlx4Cmd.NOP, Mlx4Cmd.WRITE_MTT,
        Mlx4Cmd.SW2HW_EQ, Mlx4Cmd.HW2SW_EQ, Mlx4Cmd.MAP_EQ, Mlx4Cmd.QUERY_EQ, Mlx4Cmd.SW2HW_MPT, Mlx4Cmd.HW2SW_MPT, Mlx4Cmd.QUERY_MPT,
        Mlx4Cmd.SW2HW_CQ, Mlx4Cmd.HW2SW_CQ, Mlx4Cmd.RST2INIT_QP, Mlx4Cmd.INIT2RTR_QP, Mlx4Cmd.TWO_RST_QP, Mlx4Cmd.SW2HW_SRQ};

    static final Set<Integer> TEARDOWN = Set.of(Mlx4Cmd.UNMAP_FA, Mlx4Cmd.CLOSE_HCA, Mlx4Cmd.UNMAP_ICM_AUX, Mlx4Cmd.HW2SW_EQ);

    static final long UNMAPPED = 0x7_0000_0000L;

    @TempDir
    Path tmp;

    @Test
    void everyMalformedCommandGetsAStatusAndTheDeviceGoesOn() {
        int commands = Integer.getInteger("cx3.fuzz.commands", 3000);
        long seed = Long.getLong("cx3.fuzz.seed", System.nanoTime());
        SplittableRandom rnd = new SplittableRandom(seed);
        Map<String, Integer> seen = new TreeMap<>();
        int done = 0;
        try {
            while (done < commands) {
                done += oneDevice(rnd, Math.min(500, commands - done), seen);
            }
        } catch (AssertionError | RuntimeException e) {
            throw new AssertionError("seed = " + seed + " (replay with -Dcx3.fuzz.seed=" + seed + "): " + e.getMessage(), e);
        }
        System.out.println("HcrFuzzTest: " + done + " commands, seed " + seed + ", (opcode, status) reached: " + seen.size() + " " + seen);
        assertTrue(seen.keySet().stream().anyMatch(k -> k.endsWith("/OK")), "some commands succeeded");
        assertTrue(seen.keySet().stream().filter(k -> k.endsWith("/OK")).count() >= Math.min(8, commands / 300),
                "commands of several kinds succeeded: " + seen.keySet());
        assertTrue(seen.size() >= Math.min(40, commands / 50), "the generator reached a variety of (opcode, status): " + seen.keySet());
    }

    /** One device from power-on to audit: a random level, then {@code n} commands in rounds, each ended by a NOP. */
    private int oneDevice(SplittableRandom rnd, int n, Map<String, Integer> seen) {
        try (HcrHarness h = new HcrHarness(tmp.resolve("d" + rnd.nextInt(1 << 30)))) {
            int level = rnd.nextInt(4);
            h.bringUp(level);
            List<HcrHarness.Page> boxes = List.of(h.page(), h.page(), h.page(), h.page());
            int done = 0;
            while (done < n) {
                int round = 1 + rnd.nextInt(20);
                for (int i = 0; i < round && done < n; i++, done++) {
                    step(h, rnd, boxes, seen);
                }
                assertEquals(0, h.run(Mlx4Cmd.NOP, 0, 0, 0, 0, Hcr.POLL_TOKEN, false), "a NOP after the round: " + h.board.lastRefusal());
            }
            org.peerdirect.hca.boards.SiliconView e = h.board.siliconIfUp();
            assertEquals(0, e == null ? 0 : e.engineFailures(), "the engine failed on nothing of its own");
            return done;
        }
    }

    private void step(HcrHarness h, SplittableRandom rnd, List<HcrHarness.Page> boxes, Map<String, Integer> seen) {
        int r = rnd.nextInt(100);
        if (r < 3) {
            h.reset(); // a chip reset now and then: everything lent is forgotten
            if (rnd.nextBoolean()) {
                h.bringUp(1 + rnd.nextInt(3));
            }
            return;
        }
        if (r < 10) {
            noise(h, rnd);
            return;
        }
        int op = r < 80 ? KNOWN[rnd.nextInt(KNOWN.length)] : r < 90 ? rnd.nextInt(0x1000) : 0xf00 + rnd.nextInt(0x100);
        if (TEARDOWN.contains(op) && rnd.nextInt(5) != 0) {
            op = Mlx4Cmd.QUERY_EQ; // the teardown commands rarer, so the fuzz spends its time on a device that is up
        }
        int opMod = rnd.nextInt(4) == 0 ? rnd.nextInt(256) : 0;
        HcrHarness.Page in = boxes.get(rnd.nextInt(boxes.size()));
        fill(in.mem(), op, rnd);
        long inParam = param(rnd, in);
        long outParam = param(rnd, boxes.get(rnd.nextInt(boxes.size())));
        int inMod = switch (rnd.nextInt(4)) {
            case 0 -> 0;
            case 1 -> rnd.nextInt(8);
            case 2 -> rnd.nextInt(1 << 16);
            default -> rnd.nextInt();
        };
        boolean event = rnd.nextInt(8) == 0;
        int status = h.run(op, opMod, inParam, inMod, outParam, rnd.nextInt(0x10000), event);
        assertTrue(STATUSES.contains(status), Mlx4Cmd.name(op) + " answered status 0x" + Integer.toHexString(status));
        if (!Mlx4Cmd.known(op)) {
            assertEquals(Mlx4Cmd.STAT_BAD_OP, status, "an unknown opcode 0x" + Integer.toHexString(op));
        }
        seen.merge((Mlx4Cmd.known(op) ? Mlx4Cmd.name(op) : "unknown") + "/" + Mlx4Cmd.statusName(status), 1, Integer::sum);
    }

    /** An input or output parameter: mostly the page, else zero, misaligned, unmapped or random. */
    private static long param(SplittableRandom rnd, HcrHarness.Page p) {
        return switch (rnd.nextInt(10)) {
            case 0 -> 0;
            case 1 -> p.iova() + 8 * (1 + rnd.nextInt(500));
            case 2 -> UNMAPPED + 4096L * rnd.nextInt(1000);
            case 3 -> rnd.nextLong();
            default -> p.iova();
        };
    }

    /** A mailbox: random bytes, or a plausible structure for {@code op} with random fields. */
    private static void fill(MemorySegment m, int op, SplittableRandom rnd) {
        m.fill((byte) 0);
        if (rnd.nextInt(5) == 0) {
            for (long off = 0; off < 4096; off += 8) {
                m.set(BE64, off, rnd.nextLong());
            }
            return;
        }
        switch (op) {
            case Mlx4Cmd.MAP_FA, Mlx4Cmd.MAP_ICM_AUX, Mlx4Cmd.MAP_ICM -> {
                int n = 1 + rnd.nextInt(20);
                for (int i = 0; i < n; i++) {
                    m.set(BE64, (long) i * IcmMap.ENTRY_SIZE + IcmMap.VIRT, rnd.nextBoolean() ? HcrHarness.MTT_BASE + 4096L * rnd.nextInt(64) : rnd.nextLong());
                    m.set(BE64, (long) i * IcmMap.ENTRY_SIZE + IcmMap.PHYS, rnd.nextBoolean() ? UNMAPPED + 4096L * i | rnd.nextInt(3) : rnd.nextLong());
                }
            }
            case Mlx4Cmd.INIT_HCA -> {
                m.set(U8, InitHca.VERSION, (byte) (rnd.nextInt(4) == 0 ? rnd.nextInt(256) : InitHca.VERSION_2));
                m.set(BE64, InitHca.MTT_BASE, rnd.nextBoolean() ? HcrHarness.MTT_BASE : rnd.nextLong());
                m.set(BE64, InitHca.QPC_BASE, rnd.nextInt(4) == 0 ? rnd.nextLong() : 0);
            }
            case Mlx4Cmd.SW2HW_EQ -> {
                m.set(U8, EqContext.LOG_EQ_SIZE, (byte) rnd.nextInt(20));
                m.set(U8, EqContext.INTR, (byte) rnd.nextInt(12));
                m.set(U8, EqContext.LOG_PAGE_SIZE, (byte) (rnd.nextInt(4) == 0 ? rnd.nextInt(8) : 0));
                m.set(BE32, EqContext.MTT_BASE_ADDR_L, rnd.nextBoolean() ? Mtt.ENTRY_SIZE * rnd.nextInt(16) : rnd.nextInt());
            }
            case Mlx4Cmd.SW2HW_MPT -> {
                m.set(BE32, MptEntry.FLAGS, rnd.nextBoolean() ? MptEntry.FLAG_REGION | MptEntry.FLAG_MIO | MptEntry.PERM_MASK : rnd.nextInt());
                int index = 1 + rnd.nextInt(8);
                m.set(BE32, MptEntry.KEY, MptEntry.keyToHwIndex(rnd.nextBoolean() ? index << 8 | rnd.nextInt(256) : rnd.nextInt()));
                m.set(BE64, MptEntry.START, rnd.nextInt(3) == 0 ? rnd.nextLong() : 0x10_0000L + rnd.nextInt(1 << 16));
                m.set(BE64, MptEntry.LENGTH, rnd.nextInt(3) == 0 ? rnd.nextLong() : rnd.nextInt(1 << 16));
                m.set(BE64, MptEntry.MTT_ADDR, rnd.nextBoolean() ? 0 : rnd.nextLong());
                m.set(BE32, MptEntry.ENTITY_SIZE, rnd.nextBoolean() ? 12 : rnd.nextInt(40));
            }
            case Mlx4Cmd.WRITE_MTT -> {
                m.set(BE64, Mtt.WRITE_START, rnd.nextBoolean() ? rnd.nextInt(8192) : rnd.nextLong());
                for (int i = 0; i < 16; i++) {
                    m.set(BE64, Mtt.WRITE_ENTRIES + 8L * i, rnd.nextBoolean() ? UNMAPPED + 4096L * i | Mtt.PRESENT : rnd.nextLong());
                }
            }
            case Mlx4Cmd.MAD_IFC -> {
                m.set(U8, Mad.MGMT_CLASS, (byte) (rnd.nextBoolean() ? Mad.MGMT_CLASS_SUBN_LID_ROUTED : rnd.nextInt(256)));
                m.set(U8, Mad.METHOD, (byte) (rnd.nextBoolean() ? Mad.METHOD_GET : rnd.nextInt(256)));
                m.set(org.peerdirect.hca.cx3.ifc.Be.BE16, Mad.ATTR_ID, (short) (rnd.nextBoolean() ? Mad.ATTR_PORT_INFO : rnd.nextInt(0x10000)));
            }
            default -> {
                for (int i = 0; i < 16; i++) {
                    m.set(BE32, 4L * rnd.nextInt(64), rnd.nextInt());
                }
            }
        }
    }

    /** Writes the device must shrug off: HCR words without the go bit, EQ doorbells, random UAR writes. */
    private static void noise(HcrHarness h, SplittableRandom rnd) {
        switch (rnd.nextInt(3)) {
            case 0 -> h.fn.write32be(0, Hcr.BASE + 4L * rnd.nextInt(6), rnd.nextInt());
            case 1 -> h.fn.write32be(2, Uar.eqDoorbell(rnd.nextInt(40)), rnd.nextInt());
            default -> h.fn.write32be(2, 8L * rnd.nextInt((int) (8L << 20) / 8), rnd.nextInt());
        }
    }
}
