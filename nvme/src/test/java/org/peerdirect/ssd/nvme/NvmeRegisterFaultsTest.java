package org.peerdirect.ssd.nvme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.ssd.regs.NvmeCommand.*;
import static org.peerdirect.ssd.regs.NvmeRegs.*;

import java.lang.foreign.Arena;
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
import org.peerdirect.ssd.model.NvmeSsd;
import org.peerdirect.ssd.nvme.host.NvmeDev;

/**
 * The three faults of issue 41's "bad input" list for the NVMe register interface, each written
 * once on purpose through the driver's PCI function (the fuzz, {@link NvmeFuzzTest}, reaches them
 * at random and can only check them loosely, since its random AQA and CC leave the controller's
 * state unknown): writes to undefined registers, admin queues at bad bus addresses, doorbells
 * past the queue. Each is answered as the specification and the model's documentation say
 * (no effect; {@code CSTS.CFS} naming the queue and the address; an Error asynchronous event),
 * never a hang, and the driver works after it (a reset, Identify Controller). Every test ends
 * with the audit: IOMMU faults are expected (they are the bad addresses), nothing else; nothing
 * left mapped, every frame free.
 */
class NvmeRegisterFaultsTest {

    /** No IOVA of a 32 MiB machine reaches this: DMA there is an IOMMU fault. */
    static final long UNMAPPED = 0x7_0000_0000L;

    @TempDir
    Path tmp;

    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;
    NvmeSsd ssd;
    PciFunction fn;
    NvmePmr pmr;
    /** A page of the test's own mapped for the SSD: Identify's buffer, or an admin SQ the test writes itself. */
    long pagePfn;
    long pageIova;

    @BeforeEach
    void machine() {
        mm = new Mm(32L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        ssd = new NvmeSsd("Samsung PM173X NVMe SSD", tmp.resolve("nvme.pmr"), 64 << 10);
        fn = bus.register(ssd.spec());
        pmr = new NvmePmr(mm, fn, 0);
        pagePfn = mm.allocPages(0);
        pageIova = fn.dma().dmaMapPage(pagePfn, DmaDirection.BIDIRECTIONAL);
    }

    @AfterEach
    void audit() {
        assertEquals(List.of(), pmr.shutdown(), "a clean shutdown");
        assertEquals(0, pmr.info().dmaPages(), "the driver's admin queue freed");
        assertEquals(1, fn.dma().mappedPages(), "only the test's page is left mapped");
        fn.dma().dmaUnmap(pageIova, 1);
        mm.freePages(pagePfn, 0);
        fn.remove();
        ssd.close();
        bus.close();
        IommuAudit a = iommu.audit();
        assertTrue(a.violationFree(), "no use-after-free, no free while mapped: " + a);
        assertEquals(0, a.liveMappings(), "no mapping left: " + a);
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        assertEquals(List.of(), bus.warnings(), "no BAR handler failed");
        mm.close();
    }

    @Test
    void theAdminQueueIsTwoCoherentPagesAtTheAddressesTheControllerWasGiven() {
        assertEquals(2, pmr.info().dmaPages(), "the SQ and the CQ, a page each");
        assertEquals(3, fn.dma().mappedPages(), "the driver's two pages and the test's one");
        long asq = fn.read64(0, NVME_REG_ASQ);
        long acq = fn.read64(0, NVME_REG_ACQ);
        assertTrue(asq != 0 && acq != 0 && asq != acq && asq != pageIova && acq != pageIova, "two pages of the driver's own");
        identify();
        assertEquals(3, fn.dma().mappedPages(), "Identify's buffer is the caller's: nothing mapped per command");
    }

    @Test
    void writesToUndefinedRegistersHaveNoEffectAndAreCounted() {
        int cc = fn.read32(0, NVME_REG_CC);
        int aqa = fn.read32(0, NVME_REG_AQA);
        long asq = fn.read64(0, NVME_REG_ASQ);
        // reserved dwords of the register file (below the doorbells), and the read-only CSTS and VS
        long[] undefined = {0x18, 0x40, 0x100, 0x400, 0xdfc, 0xffc};
        long ignored = ssd.controller().ignoredWrites();
        for (long off : undefined) {
            fn.write32(0, off, 0xdead_beef);
            assertEquals(0, fn.read32(0, off), String.format("reserved 0x%x reads 0 after a write", off));
        }
        fn.write32(0, NVME_REG_VS, 0x0002_0000);
        fn.write32(0, NVME_REG_CSTS, NVME_CSTS_CFS);
        assertEquals(ignored + undefined.length + 2, ssd.controller().ignoredWrites(), "each write counted as one without effect");
        assertEquals(0x00010400, fn.read32(0, NVME_REG_VS), "VS read-only");
        assertEquals(NVME_CSTS_RDY, fn.read32(0, NVME_REG_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), "still ready, no fatal status");
        assertEquals(cc, fn.read32(0, NVME_REG_CC));
        assertEquals(aqa, fn.read32(0, NVME_REG_AQA));
        assertEquals(asq, fn.read64(0, NVME_REG_ASQ));
        assertEquals(0, ssd.controller().fatalErrors());
        identify(); // the running queue was not touched
    }

    @Test
    void anAdminQueueAtBusAddressZeroIsRefusedAtEnable() {
        restartWith(0, pageIova);
        assertFatal("an admin queue at bus address 0");
        assertEquals(0, fn.read32(0, NVME_REG_CSTS) & NVME_CSTS_RDY, "not ready");
        long ignored = ssd.controller().ignoredWrites();
        fn.write32(0, NVME_REG_DBS, 1);
        assertEquals(ignored + 1, ssd.controller().ignoredWrites(), "a doorbell with no queue has no effect");
        usableAfterReset();
    }

    @Test
    void anUnalignedQueueBaseKeepsOnlyItsPageAddress() {
        fn.write32(0, NVME_REG_CC, fn.read32(0, NVME_REG_CC) & ~NVME_CC_ENABLE);
        fn.write64(0, NVME_REG_ASQ, pageIova + 0x123);
        fn.write64(0, NVME_REG_ACQ, pageIova + 0xff8);
        assertEquals(pageIova, fn.read64(0, NVME_REG_ASQ), "ASQB's bits 11:0 are reserved");
        assertEquals(pageIova, fn.read64(0, NVME_REG_ACQ), "ACQB's bits 11:0 are reserved");
        usableAfterReset();
    }

    @Test
    void aSubmissionQueueTheControllerCannotReachIsAFatalErrorNamingTheAddress() {
        long faults = iommu.audit().faults();
        restartWith(UNMAPPED, pageIova);
        assertEquals(NVME_CSTS_RDY, fn.read32(0, NVME_REG_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), "enabled: the address is fetched only on a doorbell");
        fn.write32(0, NVME_REG_DBS, 1);
        assertFatal(String.format("admin SQ entry 0 at bus address 0x%x", UNMAPPED));
        assertTrue(iommu.audit().faults() > faults, "the fetch was an IOMMU fault");
        usableAfterReset();
    }

    @Test
    void aCompletionQueueTheControllerCannotReachIsAFatalErrorNamingTheAddress() {
        // one command of the test's own in its page (an opcode the controller does not know: it completes at once)
        MemorySegment sq = mm.pageAddress(pagePfn, 0);
        sq.fill((byte) 0);
        sq.set(ValueLayout.JAVA_BYTE, SQE_OPCODE, (byte) 0x7f);
        long faults = iommu.audit().faults();
        restartWith(pageIova, UNMAPPED + 0x3000);
        fn.write32(0, NVME_REG_DBS, 1);
        assertFatal(String.format("admin CQ entry 0 at bus address 0x%x", UNMAPPED + 0x3000));
        assertTrue(iommu.audit().faults() > faults, "the completion's write was an IOMMU fault");
        usableAfterReset();
    }

    @Test
    void doorbellsPastTheQueueAreErrorEventsAndChangeNothing() {
        int aqa = fn.read32(0, NVME_REG_AQA);
        int sqSize = (aqa & NVME_AQA_ASQS_MASK) + 1;
        int cqSize = ((aqa >>> NVME_AQA_ACQS_SHIFT) & NVME_AQA_ASQS_MASK) + 1;
        assertEquals(NvmeDev.NVME_AQ_DEPTH, sqSize, "the driver's admin queue");
        int dstrd = capStride(fn.read64(0, NVME_REG_CAP));
        // the SQ tail one past the last entry, far past, negative; the CQ head past the queue; a queue that does not exist
        long[][] writes = {{doorbell(0, false, dstrd), sqSize}, {doorbell(0, false, dstrd), 4095}, {doorbell(0, false, dstrd), -1},
                {doorbell(0, true, dstrd), cqSize}, {doorbell(1, false, dstrd), 0}, {doorbell(7, true, dstrd), 1}};
        int[] info = {NVME_AER_ERROR_INVALID_DB_VALUE, NVME_AER_ERROR_INVALID_DB_VALUE, NVME_AER_ERROR_INVALID_DB_VALUE,
                NVME_AER_ERROR_INVALID_DB_VALUE, NVME_AER_ERROR_INVALID_DB_REG, NVME_AER_ERROR_INVALID_DB_REG};
        for (int i = 0; i < writes.length; i++) {
            NvmeSsd.ControllerCounters before = ssd.controller();
            long aens = pmr.info().asyncEvents();
            fn.write32(0, writes[i][0], (int) writes[i][1]);
            NvmeSsd.ControllerCounters after = ssd.controller();
            String what = String.format("doorbell 0x%x = %d", writes[i][0], writes[i][1]);
            assertEquals(before.invalidDoorbells() + 1, after.invalidDoorbells(), what + ": an invalid doorbell");
            // the tail was not taken: nothing fetched but, at most, the Asynchronous Event Request the driver posts again
            assertTrue(after.commands() - before.commands() <= 1, what + ": no command fetched past the driver's AER");
            assertEquals(0, after.fatalErrors(), what + ": not fatal");
            // the event's completion was posted before Identify's, so the driver has read it when Identify returns
            identify();
            NvmePmr.Info seen = pmr.info();
            assertEquals(aens + 1, seen.asyncEvents(), what + ": the driver received one asynchronous event");
            assertEquals(aerResult(NVME_AER_ERROR, info[i], NVME_LOG_ERROR), (int) seen.recentEvents().getLast(), what + ": its DW0");
        }
        assertEquals(0, pmr.info().resets(), "no reset was needed");
    }

    /** Disables the controller and enables it on admin queues at {@code asq} and {@code acq} (AQA as the driver left it). */
    private void restartWith(long asq, long acq) {
        int cc = fn.read32(0, NVME_REG_CC);
        fn.write32(0, NVME_REG_CC, cc & ~NVME_CC_ENABLE);
        assertEquals(0, fn.read32(0, NVME_REG_CSTS) & NVME_CSTS_RDY, "disabled");
        fn.write64(0, NVME_REG_ASQ, asq);
        fn.write64(0, NVME_REG_ACQ, acq);
        fn.write32(0, NVME_REG_CC, cc | NVME_CC_ENABLE);
    }

    private void assertFatal(String named) {
        NvmeSsd.ControllerCounters c = ssd.controller();
        assertEquals(NVME_CSTS_CFS, fn.read32(0, NVME_REG_CSTS) & NVME_CSTS_CFS, "CSTS.CFS");
        assertEquals(1, c.fatalErrors());
        assertTrue(c.lastFatal().contains(named), "the fatal error names it: " + c.lastFatal());
    }

    /** The driver resets the controller onto its own queue, and Identify goes through. */
    private void usableAfterReset() {
        pmr.reset();
        assertEquals(NVME_CSTS_RDY, fn.read32(0, NVME_REG_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), "ready again, CFS cleared");
        identify();
    }

    private void identify() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment c = arena.allocate(SQE_SIZE, 8);
            c.set(ValueLayout.JAVA_BYTE, SQE_OPCODE, (byte) nvme_admin_identify);
            c.set(LE64, SQE_PRP1, pageIova);
            c.set(LE32, SQE_CDW10, NVME_ID_CNS_CTRL);
            assertEquals(NVME_SC_SUCCESS, pmr.adminCommand(c).status(), "Identify");
        }
        MemorySegment id = mm.pageAddress(pagePfn, 0);
        String mn = new String(id.asSlice(ID_CTRL_MN, ID_CTRL_MN_LEN).toArray(ValueLayout.JAVA_BYTE), java.nio.charset.StandardCharsets.US_ASCII);
        assertEquals("Samsung PM173X NVMe SSD", mn.strip());
    }
}
