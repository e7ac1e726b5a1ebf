package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.dpa.progs.WindowProgs;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.PinnedPages;

/**
 * Windows into host memory through a real sim-kernel IOMMU domain (the mkey table is the test's,
 * {@link FakeMkeys}): write-back, read-invalidate, wrong-PD mkeys, deregistration while configured,
 * and checks C3 and C4. Every test ends with the IOMMU audit clean and every frame free.
 */
class WindowTest extends DpaRig {

    static final int PD = 1;
    static final int MKEY = 0x1100;

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    IommuDomain domain;
    AddressSpace proc;
    PinnedPages pin;
    long va;
    long iova;
    boolean mapped;
    FakeMkeys mkeys;
    int pid;
    long arg;

    @BeforeEach
    void host() {
        mm = new Mm(64L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        proc = mm.createProcess("flexio-host");
        proc.setMemlockLimit(1L << 30);
        domain = iommu.createDomain("0000:03:00.0");
        va = proc.mmap(1 << 16);
        proc.populate(va, 1 << 16, true);
        pin = proc.pinUserPages(va, 1 << 16, true);
        iova = domain.dmaMapSg(pin.pfns(), DmaDirection.BIDIRECTIONAL);
        mapped = true;
        mkeys = new FakeMkeys(domain);
        mkeys.register(MKEY, PD, va, 1 << 16, iova);
        windowPort = mkeys;
    }

    void boot(DpaConfig c) throws ImageRejected {
        start(c);
        ImagePackager p = new ImagePackager().add(WindowProgs.class);
        for (String g : List.of("writeFF", "writeNoWriteback", "pollFlag", "pollNoInv", "writeEach")) {
            p.global(g, WindowProgs.class, g);
        }
        pid = load(UID, p.pack(), 4096);
        arg = unit.heapBase(pid);
        poke(arg, unit.windowCreate(pid, PD));
        poke(arg + 8, MKEY);
        poke(arg + 16, va + 128);
    }

    int thread(String entry) {
        int t = unit.threadCreate(pid, entry, arg, 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        return t;
    }

    void unmap() {
        if (mapped) {
            domain.dmaUnmap(iova, pin.npages());
            pin.unpin(true);
            mapped = false;
        }
    }

    @AfterEach
    void audit() {
        if (unit != null) {
            unit.close();
            assertEquals(List.of(), unit.leaks());
            unit = null;
        }
        unmap();
        assertEquals(0, iommu.destroyDomain(domain));
        assertTrue(iommu.audit().violationFree(), iommu.audit().toString());
        proc.exit();
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
    }

    @Test
    void aWindowWriteBackReachesHostMemoryThroughTheIommu() throws Exception {
        boot(DpaConfig.test(4, 1));
        thread("writeFF");
        settle();
        assertEquals(0, peek(arg + 24), "window_config succeeded");
        assertEquals(0xff, proc.readLong(va + 128));
        assertEquals(8, domain.bytesWritten(), "the audit saw the window's 8 bytes");
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
        assertEquals(List.of(), unit.findings());
    }

    @Test
    void c3WindowDataNeverWrittenBackIsReportedAndNeverReachesTheHost() throws Exception {
        boot(DpaConfig.test(4, 2).withCheck(CheckMode.WARN));
        thread("writeNoWriteback");
        settle();
        assertEquals(0, proc.readLong(va + 128));
        assertEquals(0, domain.bytesWritten());
        Finding f = unit.findings().get(0);
        assertEquals("C3", f.check());
        assertTrue(f.site().startsWith(WindowProgs.class.getName() + ".writeNoWriteback:"), f.toString());
    }

    @Test
    void anMkeyOfAnotherPdIsRefusedAtConfig() throws Exception {
        mkeys.register(0x2200, PD + 1, va, 1 << 16, iova);
        boot(DpaConfig.test(4, 3));
        poke(arg + 8, 0x2200);
        thread("writeFF");
        settle();
        assertEquals(1, peek(arg + 24), "window_config failed");
        assertEquals(0, domain.bytesWritten() + domain.bytesRead());
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
    }

    @Test
    void afterDeregistrationTheNextAccessFaultsAndNoDmaFollows() throws Exception {
        boot(DpaConfig.test(4, 4));
        int t = thread("writeEach");
        settle();
        assertEquals(1, proc.readLong(va + 128));
        mkeys.deregister(MKEY);
        unmap();
        long moved = domain.bytesWritten() + domain.bytesRead();
        long faults = iommu.audit().faults();
        unit.trigger(t);
        settle();
        assertEquals(ProcessStatus.WINDOW_FAULT, unit.processStatus(pid));
        assertTrue(unit.crashData(pid).contains("mkey 0x1100 is not valid"), unit.crashData(pid));
        assertEquals(moved, domain.bytesWritten() + domain.bytesRead(), "no window DMA after the deregistration returned");
        assertEquals(faults, iommu.audit().faults(), "refused at the mkey, before the IOMMU");
    }

    private void awaitFirstFill() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (domain.bytesRead() == 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertTrue(domain.bytesRead() > 0, "the handler started polling");
    }

    @Test
    void pollingWithReadInvalidateSeesTheHostsFlag() throws Exception {
        boot(DpaConfig.test(4, 5).concurrent().withWatchdog(Long.MAX_VALUE));
        thread("pollFlag");
        awaitFirstFill();
        proc.writeLong(va + 128, 1);
        settle();
        assertEquals(1, peek(arg + 32));
        assertEquals(List.of(), unit.findings());
    }

    @Test
    void c4PollingWithoutReadInvalidateIsCaught() throws Exception {
        boot(DpaConfig.test(4, 6).concurrent().withWatchdog(Long.MAX_VALUE));
        thread("pollNoInv");
        awaitFirstFill();
        proc.writeLong(va + 128, 1);
        settle();
        assertEquals(0, peek(arg + 32), "the thread never saw the flag");
        assertEquals(ProcessStatus.MEMORY_MODEL, unit.processStatus(pid));
        Finding f = unit.findings().get(0);
        assertEquals("C4", f.check());
        assertTrue(f.site().startsWith(WindowProgs.class.getName() + ".pollNoInv:"), f.toString());
    }
}
