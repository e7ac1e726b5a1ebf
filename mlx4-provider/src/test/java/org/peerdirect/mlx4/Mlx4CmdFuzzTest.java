package org.peerdirect.mlx4;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.mlx4.core.CmdLog;
import org.peerdirect.mlx4.core.Mlx4CmdException;
import org.peerdirect.mlx4.core.Mlx4Dev;

/**
 * The driver's command path under malformed commands: with two devices up and a connection
 * between them, the driver's own command interface ({@code mlx4_cmd}, event mode, tokens) runs
 * thousands of commands that spare the driver's state (queries with random modifiers and
 * op_mods, MAD_IFC of random MADs, unknown opcodes, SW2HW/HW2SW of MPTs, EQs and the like at
 * numbers the driver does not use, random mailbox bytes, zero and misaligned mailboxes). Each
 * ends in OK or a status the driver turns into its errno; none times out; afterwards the bring-up
 * log is intact, an RDMA WRITE between the devices still completes and the audit is clean.
 *
 * <p>Short in CI (2 000 commands); {@code -Dmlx4.fuzz.commands=1000000} for the long form.
 */
class Mlx4CmdFuzzTest {

    static final int[] OPS = {Mlx4Cmd.QUERY_FW, Mlx4Cmd.QUERY_DEV_CAP, Mlx4Cmd.QUERY_ADAPTER, Mlx4Cmd.MAD_IFC, Mlx4Cmd.QUERY_EQ,
        Mlx4Cmd.QUERY_MPT, Mlx4Cmd.HW2SW_MPT, Mlx4Cmd.SW2HW_MPT, Mlx4Cmd.SW2HW_EQ, Mlx4Cmd.MAP_FA, Mlx4Cmd.RUN_FW, Mlx4Cmd.INIT_HCA,
        Mlx4Cmd.SET_ICM_SIZE, Mlx4Cmd.NOP, Mlx4Cmd.SW2HW_CQ, Mlx4Cmd.RST2INIT_QP, Mlx4Cmd.QUERY_QP, Mlx4Cmd.ARM_SRQ};

    @TempDir
    Path tmp;

    @Test
    void malformedCommandsGetAStatusAndTheDriverStaysUsable() {
        int n = Integer.getInteger("mlx4.fuzz.commands", 2000);
        long seed = Long.getLong("mlx4.fuzz.seed", System.nanoTime());
        SplittableRandom rnd = new SplittableRandom(seed);
        Map<String, Integer> seen = new TreeMap<>();
        try (Lab lab = new Lab(tmp, 2)) {
            Lab.End a = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
            Lab.End b = lab.new End(1, 1 << 16, IbvQpType.RC, Lab.RW);
            Lab.connect(a, b, 1, 7, 14, 7);
            Mlx4Dev dev = lab.devs.get(0).core();
            List<CmdLog.Entry> bringUp = dev.cmd.log().bringUp();
            DmaCoherentPages.Page box = dev.dma.alloc();
            DmaCoherentPages.Page out = dev.dma.alloc();
            try {
                for (int i = 0; i < n; i++) {
                    String what = one(dev, rnd, box, out);
                    seen.merge(what, 1, Integer::sum);
                }
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError("seed = " + seed + " (replay with -Dmlx4.fuzz.seed=" + seed + "): " + e.getMessage(), e);
            } finally {
                dev.dma.free(box);
                dev.dma.free(out);
            }
            System.out.println("Mlx4CmdFuzzTest: " + n + " commands, seed " + seed + ": " + seen);
            assertTrue(seen.keySet().stream().anyMatch(k -> !k.endsWith("/OK")), "some commands were refused: " + seen);
            assertEquals(bringUp, dev.cmd.log().bringUp(), "the bring-up log is kept as it was");
            assertTrue(dev.cmd.eventMode(), "still completing commands by events");

            byte[] data = new byte[4096];
            rnd.nextBytes(data);
            lab.proc.copyIn(a.buf, MemorySegment.ofArray(data), 0, data.length);
            IbvSendWr w = new IbvSendWr().sge(a.buf, 4096, a.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = b.buf;
            w.rkey = b.mr.rkey();
            a.qp.postSend(w);
            IbvWc c = Lab.await(a.cq, 1).get(0);
            assertEquals(IbvWcStatus.SUCCESS, c.status, "an RDMA WRITE after the fuzz: " + c);
            byte[] got = new byte[4096];
            lab.proc.copyOut(b.buf, MemorySegment.ofArray(got), 0, got.length);
            assertTrue(java.util.Arrays.equals(data, got), "the bytes arrived");
        }
    }

    @Test
    void theBringUpRunsThroughTheHcr() {
        try (Lab lab = new Lab(tmp, 1)) {
            List<CmdLog.Entry> log = lab.devs.get(0).core().cmd.log().bringUp();
            List<String> ops = log.stream().map(e -> Mlx4Cmd.name(e.opcode())).distinct().toList();
            assertEquals(List.of("QUERY_FW", "MAP_FA", "RUN_FW", "QUERY_DEV_CAP", "SET_ICM_SIZE", "MAP_ICM_AUX", "INIT_HCA", "QUERY_ADAPTER",
                    "MAP_ICM", "SW2HW_EQ", "MAP_EQ", "NOP", "INIT_PORT"), ops, "the bring-up: " + log);
            assertTrue(log.stream().allMatch(e -> e.status() == 0), "every bring-up command succeeded: " + log);
            assertTrue(log.stream().filter(e -> e.opcode() != Mlx4Cmd.NOP && e.opcode() != Mlx4Cmd.INIT_PORT).noneMatch(CmdLog.Entry::events),
                    "polled until the EQs exist");
            CmdLog.Entry nop = log.stream().filter(e -> e.opcode() == Mlx4Cmd.NOP).findFirst().orElseThrow();
            assertTrue(nop.events(), "the NOP after the switch completes by its EQE");
        }
    }

    /** One command with random fields; returns "opcode/status". */
    private static String one(Mlx4Dev dev, SplittableRandom rnd, DmaCoherentPages.Page box, DmaCoherentPages.Page out) {
        int op = rnd.nextInt(10) == 0 ? 0x100 + rnd.nextInt(0xe00) : OPS[rnd.nextInt(OPS.length)];
        int opMod = rnd.nextInt(4) == 0 ? rnd.nextInt(256) : 0;
        // modifiers away from what the driver uses: high MPT indices, EQs past its two, ports past its one
        int inMod = switch (rnd.nextInt(3)) {
            case 0 -> (1 << 19) + rnd.nextInt(1 << 19);
            case 1 -> 8 + rnd.nextInt(24);
            default -> rnd.nextInt() | 1 << 30;
        };
        if (op == Mlx4Cmd.MAD_IFC) {
            inMod = rnd.nextInt(4);
        }
        MemorySegment m = box.mem();
        for (long off = 0; off < 4096; off += 8) {
            m.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, off, rnd.nextInt(4) == 0 ? rnd.nextLong() : 0);
        }
        long in = switch (rnd.nextInt(5)) {
            case 0 -> 0;
            case 1 -> box.iova() + 8;
            default -> box.iova();
        };
        long outp = rnd.nextInt(5) == 0 ? 0 : out.iova();
        String name = Mlx4Cmd.known(op) ? Mlx4Cmd.name(op) : "unknown";
        try {
            dev.cmd.box(in, outp, inMod, opMod, op);
            return name + "/OK";
        } catch (Mlx4CmdException e) {
            if (!Mlx4Cmd.known(op)) {
                assertEquals(Mlx4Cmd.STAT_BAD_OP, e.status(), "an unknown opcode is BAD_OP");
            }
            return name + "/" + Mlx4Cmd.statusName(e.status());
        }
    }
}
