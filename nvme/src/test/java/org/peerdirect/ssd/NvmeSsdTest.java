package org.peerdirect.ssd;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.ssd.model.NvmeSsd;
import org.peerdirect.ssd.regs.NvmeCommand;
import org.peerdirect.ssd.regs.NvmeRegs;
import org.peerdirect.ssd.nvme.host.NvmeDev;
import java.lang.foreign.MemorySegment;
import org.peerdirect.ssd.nvme.NvmePmr;
import org.peerdirect.testkit.Machine;

/**
 * The SSD model and its driver: registers, persistence by the PMR write barrier and by a normal
 * shutdown, loss of posted writes on power loss, the media file's checks, user mappings, MMIO,
 * peer-to-peer DMA through the PMR BAR and invalidation when a pinned range goes.
 */
class NvmeSsdTest {

    static final long PMR = 1L << 20;

    @TempDir
    Path tmp;
    Machine m;
    NvmeSsd ssd;
    PciFunction fn;
    NvmePmr pmr;

    @BeforeEach
    void up() {
        m = Machine.builder(tmp.resolve("machine")).build();
        powerOn();
    }

    private void powerOn() {
        ssd = new NvmeSsd("test-ssd", tmp.resolve("media/nvme0.pmr"), PMR);
        fn = m.plug(ssd.spec());
        pmr = new NvmePmr(m.mm(), fn, 0);
    }

    /** Pulls the card without a shutdown: what was posted and not flushed is lost. */
    private void powerLoss() {
        fn.remove();
        ssd.close();
    }

    private void cleanPowerOff() {
        assertEquals(List.of(), pmr.shutdown());
        fn.remove();
        ssd.close();
    }

    @AfterEach
    void down() {
        if (ssd != null) {
            cleanPowerOff();
        }
        m.close(); // the audit: no mapping, no use-after-free
    }

    private static byte[] text(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void theControllerAnnouncesAPmrWithTheReadBarrier() {
        long cap = fn.read64(0, NvmeRegs.NVME_REG_CAP);
        assertTrue((cap & NvmeRegs.NVME_CAP_PMRS) != 0, "CAP.PMRS");
        assertEquals(0x00010400, fn.read32(0, NvmeRegs.NVME_REG_VS), "NVMe 1.4");
        int pmrcap = fn.read32(0, NvmeRegs.NVME_REG_PMRCAP);
        assertEquals(NvmeSsd.PMR_BAR, (pmrcap >>> NvmeRegs.PMRCAP_BIR_SHIFT) & 7, "BIR");
        assertEquals(NvmeRegs.PMRWBM_READ_PMR | NvmeRegs.PMRWBM_READ_PMRSTS, (pmrcap >>> NvmeRegs.PMRCAP_PMRWBM_SHIFT) & 0xf,
                "PMRWBM: a read of the PMR and a read of PMRSTS are both write barriers");
        assertEquals(PMR, fn.barSize(NvmeSsd.PMR_BAR));
        assertEquals(NvmeRegs.NVME_CSTS_RDY, fn.read32(0, NvmeRegs.NVME_REG_CSTS) & NvmeRegs.NVME_CSTS_RDY, "enabled by the probe");
        assertEquals(0, fn.read32(0, NvmeRegs.NVME_REG_PMRSTS) & NvmeRegs.PMRSTS_NRDY, "PMR ready");
    }

    @Test
    void theProbeBringsTheControllerUpOnAnAdminQueueAndIdentifiesIt() {
        int aqa = fn.read32(0, NvmeRegs.NVME_REG_AQA);
        assertEquals(NvmeDev.NVME_AQ_DEPTH - 1, aqa & NvmeRegs.NVME_AQA_ASQS_MASK, "AQA.ASQS");
        assertEquals(NvmeDev.NVME_AQ_DEPTH - 1, aqa >>> NvmeRegs.NVME_AQA_ACQS_SHIFT, "AQA.ACQS");
        assertTrue(fn.read64(0, NvmeRegs.NVME_REG_ASQ) != 0 && fn.read64(0, NvmeRegs.NVME_REG_ACQ) != 0, "ASQ and ACQ programmed");
        int cc = fn.read32(0, NvmeRegs.NVME_REG_CC);
        assertEquals(NvmeRegs.NVME_CC_ENABLE | NvmeRegs.NVME_CC_IOSQES | NvmeRegs.NVME_CC_IOCQES, cc, "CC: NVM, 4 KiB pages, round robin, enabled");
        NvmePmr.Info i = pmr.info();
        assertEquals("test-ssd", i.model(), "Identify Controller's MN: the model's name");
        assertEquals("1.4", i.version());
        assertTrue(i.serial().startsWith("PD"), i.serial());
        assertEquals(2, ssd.controller().commands(), "Identify, and the Asynchronous Event Request left outstanding");
        assertEquals(1, fn.msixVectors());
        assertTrue(fn.irqRequested(0), "the admin queue's vector");
    }

    @Test
    void anInvalidDoorbellReachesTheDriverAsAnAsynchronousEvent() {
        fn.write32(0, NvmeRegs.doorbell(3, false, 0), 1); // no queue 3
        MemorySegment abort = MemorySegment.ofArray(new byte[64]);
        abort.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) NvmeCommand.nvme_admin_abort_cmd);
        NvmePmr.AdminCompletion c = pmr.adminCommand(abort); // the driver reaps the event's completion with it at the latest
        assertEquals(NvmeCommand.NVME_SC_SUCCESS, c.status());
        assertEquals(1, c.result(), "Abort: not aborted");
        assertEquals(1, pmr.info().asyncEvents());
        assertEquals(List.of(NvmeCommand.aerResult(NvmeCommand.NVME_AER_ERROR, NvmeCommand.NVME_AER_ERROR_INVALID_DB_REG, NvmeCommand.NVME_LOG_ERROR)),
                pmr.info().recentEvents());
        assertEquals(4, ssd.controller().commands(), "the driver posted its request again after the event");
        MemorySegment aer = MemorySegment.ofArray(new byte[64]);
        aer.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) NvmeCommand.nvme_admin_async_event);
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> pmr.adminCommand(aer)).errno(), "requests are the driver's own");
        MemorySegment bad = MemorySegment.ofArray(new byte[64]);
        bad.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) 0x7f);
        assertEquals(NvmeCommand.NVME_SC_INVALID_OPCODE, pmr.adminCommand(bad).status());
    }

    @Test
    void aControllerResetBehindTheDriversBackIsRecoveredAndThePmrStaysReachable() {
        pmr.write(0x100, text("before"));
        fn.write32(0, NvmeRegs.NVME_REG_CC, 0); // the controller reset under the driver
        fn.write32(0, NvmeRegs.NVME_REG_PMRCTL, 0); // and the PMR turned off
        MemorySegment id = MemorySegment.ofArray(new byte[64]);
        id.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0, (byte) NvmeCommand.nvme_admin_abort_cmd);
        assertEquals(NvmeCommand.NVME_SC_SUCCESS, pmr.adminCommand(id).status(), "the driver resets the controller and runs the command");
        assertEquals(1, pmr.info().resets());
        pmr.flush();
        assertArrayEquals(text("before"), pmr.read(0x100, 6), "the reset put the PMR back on; its bytes stayed");
    }

    @Test
    void shutdownIsNormalThroughCcShnAndFreesTheAdminQueue() {
        long mapped = m.iommu().domains().stream().filter(d -> d.name().equals(fn.bdf())).mapToLong(d -> d.mappedPages()).sum();
        assertEquals(2, mapped, "the admin SQ and CQ pages");
        assertEquals(List.of(), pmr.shutdown());
        assertEquals(0, fn.read32(0, NvmeRegs.NVME_REG_CSTS), "CC.EN 0 after SHST said complete: the controller forgot the queue");
        assertEquals(0, m.iommu().domains().stream().filter(d -> d.name().equals(fn.bdf())).mapToLong(d -> d.mappedPages()).sum());
        assertFalse(fn.irqRequested(0));
        assertEquals(List.of(), pmr.shutdown(), "idempotent");
        fn.remove();
        ssd.close();
        ssd = null;
    }

    @Test
    void aFlushedWriteSurvivesPowerLossAndAnUnflushedOneDoesNot() {
        pmr.write(0x1000, text("durable"));
        pmr.flush();
        pmr.write(0x2000, text("volatile"));
        assertArrayEquals(text("volatile"), pmr.read(0x2000, 8), "posted writes read back at once");
        assertEquals(1, ssd.unpersistedPages());
        powerLoss();
        powerOn();
        assertArrayEquals(text("durable"), pmr.read(0x1000, 7));
        assertArrayEquals(new byte[8], pmr.read(0x2000, 8), "the posted write died with the power");
    }

    @Test
    void aNormalShutdownPersistsWhatWasPosted() {
        pmr.write(0x3003, text("shutdown")); // unaligned: read-modify-write of words
        cleanPowerOff();
        powerOn();
        assertArrayEquals(text("shutdown"), pmr.read(0x3003, 8));
    }

    @Test
    void cpuStoresThroughAUserMappingAreInTheWindowAndPersistOnFlush() {
        AddressSpace p = m.process("app");
        long va = pmr.mmap(p, 64 << 10, 64 << 10);
        p.write(va + 5, text("cpu store"), 0, 9);
        assertArrayEquals(text("cpu store"), pmr.read((64 << 10) + 5, 9), "the same bytes through the BAR");
        assertThrows(KernelException.class, () -> p.pinUserPages(va, 4096, true), "a device mapping is not pinnable");
        pmr.flush();
        pmr.munmap(p.pid(), va);
        p.exit();
        powerLoss();
        powerOn();
        assertArrayEquals(text("cpu store"), pmr.read((64 << 10) + 5, 9));
    }

    @Test
    void thePmrOffsetNamesTheSameBytesAcrossMappingsAndOverlapsAreRefused() {
        AddressSpace a = m.process("a");
        long va = pmr.mmap(a, 0x10000, 0x10000);
        KernelException e = assertThrows(KernelException.class, () -> pmr.mmap(a, 0x18000, 0x10000));
        assertEquals(Errno.EBUSY, e.errno());
        assertTrue(e.getMessage().contains("overlaps"), e.getMessage());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> pmr.mmap(a, 0x123, 4096)).errno());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> pmr.mmap(a, PMR - 4096, 8192)).errno());
        long first = pmr.alloc(a, 4096); // first fit: below the fixed mapping
        assertEquals(0, pmr.pmrOffset(a.pid(), first));
        assertEquals(0x10000, pmr.pmrOffset(a.pid(), va));
        KernelException full = assertThrows(KernelException.class, () -> pmr.alloc(a, PMR));
        assertEquals(Errno.ENOMEM, full.errno());
        pmr.munmap(a.pid(), va);
        pmr.munmap(a.pid(), first);
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> pmr.munmap(a.pid(), first)).errno());
        a.exit();
    }

    @Test
    void processExitUnmapsItsPmrMappings() {
        AddressSpace a = m.process("dies");
        pmr.alloc(a, 8192);
        pmr.alloc(a, 8192);
        assertEquals(2, pmr.info().mappings());
        a.exit();
        assertEquals(0, pmr.info().mappings());
    }

    @Test
    void aPeerWritesThroughThePmrBarAndLosesItsMappingWhenTheRangeGoes() {
        AddressSpace a = m.process("app");
        long va = pmr.alloc(a, 8192);
        IommuDomain peer = m.domain("peer0");
        int[] invalidated = {0};
        NvmePmr.Pin[] pin = new NvmePmr.Pin[1];
        NvmePmr.Mapping[] map = new NvmePmr.Mapping[1];
        pin[0] = pmr.pin(a.pid(), va, 8192, () -> {
            invalidated[0]++;
            pmr.dmaUnmap(map[0]); // as the core does through the client
            pmr.unpin(pin[0]);
        });
        map[0] = pmr.dmaMap(pin[0], peer);
        long before = m.iommu().barBytes();
        peer.write(map[0].iova() + 4096, java.lang.foreign.MemorySegment.ofArray(text("peer")), 0, 4);
        assertEquals(before + 4, m.iommu().barBytes(), "bytes across the PMR BAR");
        assertArrayEquals(text("peer"), pmr.read(4096, 4));
        byte[] cpu = new byte[4];
        a.read(va + 4096, cpu, 0, 4);
        assertArrayEquals(text("peer"), cpu, "the process sees the peer's write");
        assertEquals(1, pmr.info().pinned());
        pmr.munmap(a.pid(), va);
        assertEquals(1, invalidated[0], "the pin was invalidated before the range went");
        assertEquals(0, peer.mappedPages(), "nothing left mapped in the peer's domain");
        a.exit();
    }

    /**
     * PMRWBM bit 0 as a peer uses it (an adapter's RDMA FLUSH): a flushing read of the PMR through
     * the peer's IOMMU mapping persists the pages it covered and nothing else; a power loss then
     * keeps exactly those. The IOMMU sees the PMR as persistent memory, host frames as not.
     */
    @Test
    void aPeersFlushingReadPersistsTheRangeItCoversAndNoMore() {
        AddressSpace a = m.process("app");
        long va = pmr.alloc(a, 4 * 4096);
        IommuDomain peer = m.domain("peer0");
        NvmePmr.Pin pin = pmr.pin(a.pid(), va, 4 * 4096, () -> { });
        NvmePmr.Mapping map = pmr.dmaMap(pin, peer);
        long off = pmr.pmrOffset(a.pid(), va);
        assertTrue(peer.persistent(map.iova(), 4 * 4096), "the PMR is persistent memory for the IOMMU");
        peer.write(map.iova() + 10, java.lang.foreign.MemorySegment.ofArray(text("flushed")), 0, 7);
        peer.write(map.iova() + 2 * 4096, java.lang.foreign.MemorySegment.ofArray(text("posted")), 0, 6);
        assertEquals(2, ssd.unpersistedPages());
        long barriers = ssd.barriers();
        peer.flush(map.iova(), 4096); // the first page only
        assertEquals(barriers + 1, ssd.barriers(), "one flushing read, one barrier");
        assertEquals(1, ssd.unpersistedPages(), "the page the read covered is on the media; the other is still posted");
        pmr.dmaUnmap(map);
        pmr.unpin(pin);
        pmr.munmap(a.pid(), va);
        a.exit();
        powerLoss();
        powerOn();
        assertArrayEquals(text("flushed"), pmr.read(off + 10, 7));
        assertArrayEquals(new byte[6], pmr.read(off + 2 * 4096, 6), "the page no flush covered died with the power");
    }

    @Test
    void pinsOutsideOneMappingAreRefused() {
        AddressSpace a = m.process("app");
        long va = pmr.alloc(a, 8192);
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> pmr.pin(a.pid(), va, 3 * 4096, () -> { })).errno());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> pmr.pin(a.pid() + 1, va, 4096, () -> { })).errno());
        assertFalse(pmr.owns(a.pid(), va - 4096, 4096));
        a.exit();
    }

    @Test
    void theMediaFileIsCheckedAndLocked() throws Exception {
        IllegalStateException busy = assertThrows(IllegalStateException.class,
                () -> new NvmeSsd("second", tmp.resolve("media/nvme0.pmr"), PMR));
        assertTrue(busy.getMessage().contains("in use"), busy.getMessage());
        Files.write(tmp.resolve("small.pmr"), new byte[4096]);
        IllegalStateException size = assertThrows(IllegalStateException.class, () -> new NvmeSsd("x", tmp.resolve("small.pmr"), PMR));
        assertTrue(size.getMessage().contains("4096 bytes"), size.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new NvmeSsd("x", tmp.resolve("odd.pmr"), 100_000));
    }

    @Test
    void aDisabledPmrReadsAllOnesAndOutOfRangeAccessIsNamed() {
        fn.write32(0, NvmeRegs.NVME_REG_PMRCTL, 0);
        assertEquals(-1, fn.read32(NvmeSsd.PMR_BAR, 0), "a disabled PMR answers nothing");
        fn.write32(0, NvmeRegs.NVME_REG_PMRCTL, NvmeRegs.PMRCTL_EN);
        KernelException e = assertThrows(KernelException.class, () -> pmr.read(PMR - 2, 4));
        assertTrue(e.getMessage().contains("outside"), e.getMessage());
        assertThrows(KernelException.class, () -> pmr.write(-1, new byte[1]));
    }

    @Test
    void aGoneControllerFailsTheBarrierWithENODEV() {
        fn.remove();
        KernelException e = assertThrows(KernelException.class, pmr::flush);
        assertEquals(Errno.ENODEV, e.errno());
        ssd.close();
        ssd = null; // nothing to shut down
    }
}
