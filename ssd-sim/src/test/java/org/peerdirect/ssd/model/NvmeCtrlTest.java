package org.peerdirect.ssd.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.ssd.regs.NvmeCommand.*;
import static org.peerdirect.ssd.regs.NvmeRegs.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * The SSD's controller as a driver sees it, bytes and registers only: reset values, read-only and
 * reserved registers, CC.EN with a configuration it cannot run and a queue it cannot reach
 * (CSTS.CFS), the admin queue's commands, completions and phase tag, a full completion queue,
 * invalid doorbells as asynchronous events, shutdown by CC.SHN. Every test ends with the IOMMU
 * audit: faults only where a test provoked one, no violation, nothing mapped, every frame free.
 */
class NvmeCtrlTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;
    NvmeSsd ssd;
    PciFunction fn;
    /** Pages: 0 the SQ, 1 the CQ, 2 and 3 data; mapped at iova, iova + 4096, ... */
    long pfn;
    long iova;
    MemorySegment mem;
    long expectedFaults;

    @BeforeEach
    void up() {
        mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        ssd = new NvmeSsd("Samsung PM173X NVMe SSD", tmp.resolve("nvme0.pmr"), 64 << 10);
        fn = bus.register(ssd.spec());
        pfn = mm.allocPages(2);
        iova = fn.dma().dmaMapSg(new long[] {pfn, pfn + 1, pfn + 2, pfn + 3}, DmaDirection.BIDIRECTIONAL);
        mem = mm.pageAddress(pfn, 2);
    }

    @AfterEach
    void down() {
        fn.dma().dmaUnmap(iova, 4);
        mm.freePages(pfn, 2);
        fn.remove();
        ssd.close();
        bus.close();
        IommuAudit a = iommu.audit();
        assertEquals(expectedFaults, a.faults(), "IOMMU faults: " + a);
        assertTrue(a.violationFree() && a.liveMappings() == 0, "audit: " + a);
        assertEquals(List.of(), bus.warnings());
        assertEquals(mm.totalFrames(), mm.freeFrames());
        mm.close();
    }

    int r32(int off) {
        return fn.read32(0, off);
    }

    /** AQA for an SQ of {@code sq} and a CQ of {@code cq} entries, ASQ/ACQ our pages, CC.EN. */
    void enable(int sq, int cq) {
        fn.write32(0, NVME_REG_AQA, (sq - 1) | ((cq - 1) << 16));
        fn.write64(0, NVME_REG_ASQ, iova);
        fn.write64(0, NVME_REG_ACQ, iova + 4096);
        fn.write32(0, NVME_REG_CC, NVME_CC_ENABLE | NVME_CC_IOSQES | NVME_CC_IOCQES);
        assertEquals(NVME_CSTS_RDY, r32(NVME_REG_CSTS));
    }

    MemorySegment sqe(int slot) {
        return mem.asSlice(slot * 64L, 64);
    }

    MemorySegment cqe(int slot) {
        return mem.asSlice(4096 + slot * 16L, 16);
    }

    void command(int slot, int opcode, int cid, int cdw10, long prp1) {
        MemorySegment e = sqe(slot);
        e.fill((byte) 0);
        setHeader(e, opcode, cid, 0);
        e.set(LE64, SQE_PRP1, prp1);
        e.set(LE32, SQE_CDW10, cdw10);
    }

    @Test
    void registersHoldTheirResetValuesAndReadOnlyOrReservedWritesHaveNoEffect() {
        long cap = fn.read64(0, NVME_REG_CAP);
        assertEquals(1023, capMqes(cap));
        assertEquals(20, capTimeout(cap), "CAP.TO 10 s");
        assertEquals(0, capStride(cap));
        assertEquals(0, capMpsMin(cap));
        assertTrue((cap & NVME_CAP_CSS_NVM) != 0 && (cap & NVME_CAP_PMRS) != 0);
        assertEquals(0x00010400, r32(NVME_REG_VS));
        assertEquals(0, r32(NVME_REG_CSTS));
        assertEquals(PMRSTS_NRDY, r32(NVME_REG_PMRSTS), "PMR off at power-on");
        int pmrcap = r32(NVME_REG_PMRCAP);
        fn.write64(0, NVME_REG_CAP, 0);
        fn.write32(0, NVME_REG_VS, 0x00020000);
        fn.write32(0, NVME_REG_CSTS, -1);
        fn.write32(0, NVME_REG_PMRCAP, 0);
        fn.write32(0, NVME_REG_PMRMSCL, PMRMSC_CMSE | 0x10000);
        fn.write32(0, 0x100, 0x12345678);
        fn.write32(0, NVME_REG_AQA, -1);
        fn.write32(0, NVME_REG_ASQ, 0x12345fff);
        assertEquals(cap, fn.read64(0, NVME_REG_CAP));
        assertEquals(0x00010400, r32(NVME_REG_VS));
        assertEquals(0, r32(NVME_REG_CSTS));
        assertEquals(pmrcap, r32(NVME_REG_PMRCAP));
        assertEquals(0, r32(NVME_REG_PMRMSCL), "PMRMSC is reserved without PMRCAP.CMSS");
        assertEquals(0, r32(0x100), "reserved");
        assertEquals(NVME_AQA_DEFINED, r32(NVME_REG_AQA), "AQA's reserved bits read 0");
        assertEquals(0x12345000, r32(NVME_REG_ASQ), "ASQ bits 11:0 are reserved");
        assertEquals(7, ssd.controller().ignoredWrites(), "CAP (two halves), VS, CSTS, PMRCAP, PMRMSCL, the reserved dword");
    }

    @Test
    void anEnableTheControllerCannotRunIsAFatalStatusThatAResetClears() {
        fn.write32(0, NVME_REG_CC, NVME_CC_ENABLE); // no admin queue programmed
        assertEquals(NVME_CSTS_CFS, r32(NVME_REG_CSTS), "CSTS.CFS, not ready");
        assertTrue(ssd.controller().lastFatal().contains("ASQ"), ssd.controller().lastFatal());
        fn.write32(0, NVME_REG_CC, 0);
        assertEquals(0, r32(NVME_REG_CSTS), "the controller reset clears CSTS.CFS");
        fn.write32(0, NVME_REG_AQA, 0x0001_0001);
        fn.write64(0, NVME_REG_ASQ, iova);
        fn.write64(0, NVME_REG_ACQ, iova + 4096);
        for (int cc : new int[] {1 << NVME_CC_MPS_SHIFT, 1 << NVME_CC_CSS_SHIFT, 1 << NVME_CC_AMS_SHIFT}) {
            fn.write32(0, NVME_REG_CC, NVME_CC_ENABLE | cc);
            assertEquals(NVME_CSTS_CFS, r32(NVME_REG_CSTS), "CC 0x" + Integer.toHexString(cc));
            fn.write32(0, NVME_REG_CC, 0);
        }
        fn.write32(0, NVME_REG_AQA, 0); // one-entry queues
        fn.write32(0, NVME_REG_CC, NVME_CC_ENABLE);
        assertEquals(NVME_CSTS_CFS, r32(NVME_REG_CSTS), "AQA 0");
        assertEquals(5, ssd.controller().fatalErrors());
    }

    @Test
    void adminCommandsCompleteWithThePhaseTagAndTheirStatus() {
        enable(4, 4);
        command(0, nvme_admin_identify, 0x42, NVME_ID_CNS_CTRL, iova + 8192);
        fn.write32(0, doorbell(0, false, 0), 1);
        assertTrue(phase(cqe(0)));
        assertEquals(0x42, cqe(0).get(LE16, CQE_CID));
        assertEquals(NVME_SC_SUCCESS, status(cqe(0)));
        assertEquals(1, cqe(0).get(LE16, CQE_SQ_HEAD), "SQ head after the fetch");
        assertEquals(1, fn.msixPending(0) ? 1 : 0, "MSI-X vector 0 raised (pending: no handler)");
        MemorySegment id = mem.asSlice(8192, 4096);
        assertEquals(NvmeSsd.VENDOR_SAMSUNG, id.get(LE16, ID_CTRL_VID) & 0xffff);
        assertEquals("Samsung PM173X NVMe SSD", new String(id.asSlice(ID_CTRL_MN, 23).toArray(ValueLayout.JAVA_BYTE)));
        assertEquals(0x66, id.get(ValueLayout.JAVA_BYTE, ID_CTRL_SQES));
        // the rest: opcodes, fields and data pointers each answered with their status; the CQ wraps and the phase flips
        command(1, 0x7f, 1, 0, 0);
        command(2, nvme_admin_identify, 2, 0x99, iova + 8192);
        command(3, nvme_admin_identify, 3, NVME_ID_CNS_CTRL, iova + 8194);
        fn.write32(0, doorbell(0, true, 0), 1);
        fn.write32(0, doorbell(0, false, 0), 0); // tail wraps to 0: slots 1, 2, 3
        assertEquals(NVME_SC_INVALID_OPCODE | NVME_SC_DNR, status(cqe(1)));
        assertEquals(NVME_SC_INVALID_FIELD | NVME_SC_DNR, status(cqe(2)));
        assertEquals(NVME_SC_PRP_INVALID_OFFSET | NVME_SC_DNR, status(cqe(3)));
        command(0, nvme_admin_identify, 4, NVME_ID_CNS_NS, iova + 8192);
        command(1, nvme_admin_identify, 5, NVME_ID_CNS_CTRL, iova + 0x100000); // unmapped: a fault, answered
        fn.write32(0, doorbell(0, true, 0), 0);
        fn.write32(0, doorbell(0, false, 0), 2);
        assertTrue(!phase(cqe(0)) && !phase(cqe(1)), "second pass: phase 0");
        assertEquals(NVME_SC_INVALID_NS | NVME_SC_DNR, status(cqe(0)));
        assertEquals(NVME_SC_DATA_XFER_ERROR, status(cqe(1)));
        expectedFaults = 1;
    }

    @Test
    void aFullCompletionQueueHoldsCommandsUntilTheHostFreesASlot() {
        enable(4, 2); // one usable completion slot
        command(0, nvme_admin_abort_cmd, 1, 0, 0);
        command(1, nvme_admin_abort_cmd, 2, 0, 0);
        fn.write32(0, doorbell(0, false, 0), 2);
        assertEquals(1, cqe(0).get(LE16, CQE_CID));
        assertEquals(1, cqe(0).get(LE32, CQE_RESULT), "Abort: DW0 bit 0, the command was not aborted");
        assertEquals(1, ssd.controller().commands(), "the second command waits in the SQ");
        fn.write32(0, doorbell(0, true, 0), 1);
        assertEquals(2, cqe(1).get(LE16, CQE_CID));
        assertEquals(2, ssd.controller().commands());
    }

    @Test
    void invalidDoorbellsAreAsynchronousEventsRetainedUntilARequestIsOutstanding() {
        enable(8, 8);
        fn.write32(0, doorbell(1, false, 0), 1); // no queue 1
        fn.write32(0, doorbell(0, false, 0), 8); // outside the 8-entry SQ
        assertEquals(0, ssd.controller().commands());
        command(0, nvme_admin_async_event, 10, 0, 0);
        command(1, nvme_admin_async_event, 11, 0, 0);
        fn.write32(0, doorbell(0, false, 0), 2);
        assertEquals(10, cqe(0).get(LE16, CQE_CID), "the first request carries the first event retained");
        assertEquals(aerResult(NVME_AER_ERROR, NVME_AER_ERROR_INVALID_DB_REG, NVME_LOG_ERROR), cqe(0).get(LE32, CQE_RESULT));
        assertEquals(11, cqe(1).get(LE16, CQE_CID));
        assertEquals(aerResult(NVME_AER_ERROR, NVME_AER_ERROR_INVALID_DB_VALUE, NVME_LOG_ERROR), cqe(1).get(LE32, CQE_RESULT));
        for (int i = 0; i < 5; i++) {
            command(2 + i, nvme_admin_async_event, 12 + i, 0, 0);
        }
        fn.write32(0, doorbell(0, false, 0), 7);
        assertEquals(16, cqe(2).get(LE16, CQE_CID), "the fifth outstanding request exceeds AERL + 1 = 4");
        assertEquals(NVME_SC_ASYNC_LIMIT | NVME_SC_DNR, status(cqe(2)));
        fn.write32(0, doorbell(0, true, 0), 7); // past what was posted
        assertEquals(12, cqe(3).get(LE16, CQE_CID), "an outstanding request carries it at once");
        assertEquals(aerResult(NVME_AER_ERROR, NVME_AER_ERROR_INVALID_DB_VALUE, NVME_LOG_ERROR), cqe(3).get(LE32, CQE_RESULT));
        command(7, nvme_admin_async_event, 17, 0, 0);
        command(0, nvme_admin_identify, 13, NVME_ID_CNS_CTRL, iova + 8192);
        fn.write32(0, doorbell(0, false, 0), 1);
        assertEquals(NVME_SC_CMDID_CONFLICT | NVME_SC_DNR, status(cqe(4)), "cid 13 is an outstanding request's");
        assertEquals(3, ssd.controller().invalidDoorbells());
    }

    @Test
    void aQueueTheControllerCannotReachIsAFatalStatus() {
        fn.write32(0, NVME_REG_AQA, 0x0003_0003);
        fn.write64(0, NVME_REG_ASQ, 0x7_0000_0000L);
        fn.write64(0, NVME_REG_ACQ, iova + 4096);
        fn.write32(0, NVME_REG_CC, NVME_CC_ENABLE);
        assertEquals(NVME_CSTS_RDY, r32(NVME_REG_CSTS));
        fn.write32(0, doorbell(0, false, 0), 1);
        assertEquals(NVME_CSTS_RDY | NVME_CSTS_CFS, r32(NVME_REG_CSTS), () -> ssd.controller() + " " + bus.warnings());
        assertTrue(ssd.controller().lastFatal().contains("0x700000000"), ssd.controller().lastFatal());
        fn.write32(0, doorbell(0, false, 0), 2);
        assertEquals(1, ssd.controller().fatalErrors(), "a failed controller fetches nothing more");
        fn.write32(0, NVME_REG_CC, 0);
        enable(4, 4);
        expectedFaults = 1;
    }

    @Test
    void aShutdownNotificationPersistsThePmrAndReportsComplete() {
        enable(2, 2);
        fn.write32(0, NVME_REG_PMRCTL, PMRCTL_EN);
        fn.write32(NvmeSsd.PMR_BAR, 0, 0x5a5a5a5a);
        assertEquals(1, ssd.unpersistedPages());
        fn.write32(0, NVME_REG_CC, NVME_CC_ENABLE | NVME_CC_SHN_NORMAL);
        assertEquals(NVME_CSTS_RDY | NVME_CSTS_SHST_CMPLT, r32(NVME_REG_CSTS));
        assertEquals(0, ssd.unpersistedPages());
        fn.write32(0, NVME_REG_CC, 0);
        assertEquals(0, r32(NVME_REG_CSTS));
    }
}
