package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.function.IntConsumer;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.rdma.tools.RdmaTools;

/**
 * A container that runs for hours (issue 10): every object kind created and destroyed 100 000
 * times beside one that stays alive, and thousands of tool runs, in one machine, without running
 * out of anything (QPNs, MPT entries, CQNs, SRQNs, pids, frames, IOMMU mappings). The machine's
 * close then runs the audit: nothing leaked.
 */
class LongLivedTest {

    static final int CYCLES = 100_000;
    static final int TOOL_RUNS = 10_000;

    @TempDir
    Path tmp;
    Lab lab;
    AddressSpace proc;
    IbvContext ctx;
    IbvPd pd;
    IbvCq cq;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        proc = lab.mm.createProcess("long-lived");
        proc.setMemlockLimit(1L << 30);
        ctx = lab.ib.get(0).open(proc);
        pd = ctx.allocPd();
        cq = ctx.createCq(16, null);
    }

    @AfterEach
    void down() {
        lab.close();
    }

    private static void cycles(String kind, IntConsumer createAndDestroy) {
        for (int i = 0; i < CYCLES; i++) {
            try {
                createAndDestroy.accept(i);
            } catch (RuntimeException e) {
                throw new AssertionError(kind + ": cycle " + i + " of " + CYCLES + " failed: " + e.getMessage(), e);
            }
        }
    }

    @Test
    void everyObjectKindSurvivesAHundredThousandCycles() {
        long buf = proc.mmap(1 << 16);
        proc.populate(buf, 1 << 16, true);
        IbvMr kept = pd.regMr(buf, 4096, Lab.RW); // one MR alive throughout, as in the defect report
        int firstKey = kept.rkey();

        cycles("MR", i -> pd.regMr(buf + 4096 * (1 + i % 8), 4096, Lab.RW).dereg());
        cycles("PD", i -> ctx.allocPd().dealloc());
        cycles("CQ", i -> ctx.createCq(16, null).destroy());
        cycles("completion channel", i -> ctx.createCompChannel().destroy());
        cycles("SRQ", i -> pd.createSrq(16, 1).destroy());
        cycles("AH", i -> pd.createAh(1, 1).destroy());
        IbvQpInitAttr a = new IbvQpInitAttr();
        a.sendCq = cq;
        a.recvCq = cq;
        a.qpType = IbvQpType.RC;
        a.maxSendWr = 16;
        a.maxRecvWr = 16;
        cycles("QP", i -> pd.createQp(a).destroy());
        cycles("context", i -> lab.ib.get(1).open(proc).close());
        cycles("process", i -> lab.mm.createProcess("short").exit());

        assertEquals(firstKey, kept.rkey(), "the MR alive throughout kept its key");
        assertEquals(1, lab.core.openContexts(lab.ib.get(0)), "only the long-lived context is open");
        assertEquals(0, lab.core.openContexts(lab.ib.get(1)));
        assertEquals(1, proc.pinnedPages(), "only the kept MR pins");
        kept.dereg();
        ctx.close();
        proc.exit();
        // the machine's close audits: no IOMMU fault or mapping, no pin, every frame free
    }

    @Test
    void thousandsOfToolRunsInOneContainer() throws Exception {
        ctx.close();
        proc.exit();
        int processesBefore = lab.mm.processes().size();
        RdmaTools tools = lab.tools();
        for (int i = 0; i < TOOL_RUNS; i++) {
            String out = tools.pingpong("-s", "64", "-n", "2", "-c");
            assertTrue(out.contains("no mismatch"), "pingpong run " + i + ": " + out);
        }
        // the defect: ~4 000 runs of write_bw -q 16 ran out of QP numbers; each run takes 32 QPs
        for (int i = 0; i < TOOL_RUNS / 4; i++) {
            String out = tools.write_bw("-q", "16", "-n", "5", "-s", "64");
            assertTrue(out.contains("RDMA_Write BW Test"), "write_bw run " + i);
        }
        assertEquals(processesBefore, lab.mm.processes().size(), "every tool's processes exited");
    }
}
