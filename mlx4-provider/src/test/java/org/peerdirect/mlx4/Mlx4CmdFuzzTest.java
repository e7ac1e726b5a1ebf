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
import org.peerdirect.hca.cx3.ifc.Be;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
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
 * <p>Short in CI (2 000 commands); {@code -Dmlx4.fuzz.commands=1000000} for the long form. The
 * same for random WQE bytes in a user's send queue ({@code -Dmlx4.fuzz.wqes}).
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

    /** The opcodes a random WQE takes half of the time (the decoder's paths), else any byte. */
    static final int[] WQE_OPS = {Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM, Wqe.OP_SEND, Wqe.OP_SEND_IMM, Wqe.OP_RDMA_READ, Wqe.OP_ATOMIC_CS,
        Wqe.OP_ATOMIC_FA};

    /**
     * Random WQE bytes in the user's send queue: each iteration reconnects the pair, writes a WQE
     * of random bytes (the hardware's owner bit, a completion requested, half the time a valid
     * opcode, a random size and random segments, inline or not) after the next one, and posts a
     * valid RDMA WRITE whose doorbell makes the device fetch both. The valid one completes; the
     * random one gets an error completion or is executed as written (never a hang: each awaits a
     * bound). Afterwards the driver still moves bytes and the audit (at the lab's close) is clean.
     * {@code -Dmlx4.fuzz.wqes=N} for a longer run.
     */
    @Test
    void randomWqeBytesCompleteInErrorOrAsWrittenAndTheDriverStaysUsable() {
        int n = Integer.getInteger("mlx4.fuzz.wqes", 200);
        long seed = Long.getLong("mlx4.fuzz.seed", System.nanoTime());
        SplittableRandom rnd = new SplittableRandom(seed);
        Map<String, Integer> seen = new TreeMap<>();
        try (Lab lab = new Lab(tmp, 2)) {
            Lab.End a = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
            Lab.End b = lab.new End(1, 1 << 16, IbvQpType.RC, Lab.RW);
            org.peerdirect.mlx4.lib.Mlx4Qp q = lab.devs.get(0).qpTable[a.qp.qpNum()].lib;
            IbvQpAttr reset = new IbvQpAttr();
            reset.qpState = IbvQpState.RESET;
            try {
                for (int i = 0; i < n; i++) {
                    a.qp.modify(reset, IbvQpAttr.STATE);
                    b.qp.modify(reset, IbvQpAttr.STATE);
                    Lab.connect(a, b, 1, 0, 14, 1);
                    b.qp.postRecv(new IbvRecvWr().sge(b.buf, 4096, b.mr.lkey()));
                    byte[] wqe = new byte[q.sqStride()];
                    rnd.nextBytes(wqe);
                    MemorySegment m = MemorySegment.ofArray(wqe);
                    int op = rnd.nextBoolean() ? WQE_OPS[rnd.nextInt(WQE_OPS.length)] : rnd.nextInt(32);
                    m.set(Be.BE32, Wqe.CTRL_OWNER_OPCODE, op); // owner bit 0: the hardware's in the first pass
                    m.set(Be.BE32, Wqe.CTRL_SRCRB_FLAGS, m.get(Be.BE32, Wqe.CTRL_SRCRB_FLAGS) | Wqe.CTRL_CQ_UPDATE);
                    int ds = rnd.nextInt(5) == 0 ? rnd.nextInt(64) : 1 + rnd.nextInt(q.sqStride() / 16);
                    m.set(Be.U8, Wqe.CTRL_FENCE_SIZE, (byte) (ds | (rnd.nextBoolean() ? Wqe.FENCE : 0)));
                    int at = Wqe.CTRL_SIZE + (op == Wqe.OP_SEND || op == Wqe.OP_SEND_IMM ? 0 : Wqe.RADDR_SIZE);
                    if (rnd.nextBoolean()) { // plausible segments, mostly with the right keys: executed as written
                        m.set(Be.BE64, Wqe.CTRL_SIZE + Wqe.RADDR_VA, b.buf + rnd.nextInt(4096));
                        m.set(Be.BE32, Wqe.CTRL_SIZE + Wqe.RADDR_RKEY, rnd.nextInt(4) == 0 ? rnd.nextInt() : b.mr.rkey());
                        for (int d = at; d + 16 <= ds * 16 && d + 16 <= wqe.length; d += 16) {
                            m.set(Be.BE32, d + Wqe.DATA_BYTE_COUNT, rnd.nextInt(512));
                            m.set(Be.BE32, d + Wqe.DATA_LKEY, rnd.nextInt(4) == 0 ? rnd.nextInt() : a.mr.lkey());
                            m.set(Be.BE64, d + Wqe.DATA_ADDR, a.buf + rnd.nextInt(4096));
                        }
                    } else if (rnd.nextBoolean() && at < wqe.length) { // an inline segment's header where the data would start
                        m.set(Be.BE32, at, Wqe.INLINE_SEG | rnd.nextInt(128));
                    }
                    lab.proc.write(q.sendWqeVa(1), wqe, 0, wqe.length);
                    IbvSendWr w = new IbvSendWr().sge(a.buf, 64, a.mr.lkey());
                    w.opcode = IbvWrOpcode.RDMA_WRITE;
                    w.sendFlags = IbvSendWr.SEND_SIGNALED;
                    w.remoteAddr = b.buf;
                    w.rkey = b.mr.rkey();
                    w.wrId = 1;
                    a.qp.postSend(w);
                    List<IbvWc> c = Lab.await(a.cq, 2);
                    assertEquals(IbvWcStatus.SUCCESS, c.get(0).status, "the valid WQE before the random one");
                    seen.merge(Integer.toHexString(op) + "/" + c.get(1).status, 1, Integer::sum);
                    drain(b.cq);
                }
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError("seed = " + seed + " (replay with -Dmlx4.fuzz.seed=" + seed + "): " + e.getMessage(), e);
            }
            System.out.println("Mlx4CmdFuzzTest: " + n + " random WQEs, seed " + seed + ": " + seen);
            assertTrue(seen.keySet().stream().anyMatch(k -> k.endsWith("/LOC_QP_OP_ERR")), "some WQEs were malformed: " + seen);
            a.qp.modify(reset, IbvQpAttr.STATE);
            b.qp.modify(reset, IbvQpAttr.STATE);
            Lab.connect(a, b, 1, 7, 14, 7);
            IbvSendWr w = new IbvSendWr().sge(a.buf, 4096, a.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = b.buf;
            w.rkey = b.mr.rkey();
            a.qp.postSend(w);
            assertEquals(IbvWcStatus.SUCCESS, Lab.await(a.cq, 1).get(0).status, "an RDMA WRITE after the fuzz");
        }
    }

    private static void drain(org.peerdirect.ib.core.verbs.IbvCq cq) {
        IbvWc[] wc = {new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc()};
        while (cq.poll(wc.length, wc) > 0) {
            // the peer's receive completions (or flushes) of this round
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
