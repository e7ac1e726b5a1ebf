package org.peerdirect.ib.core.peer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.testing.Rig;
import org.peerdirect.ib.core.testing.TestDmaDevice.Mr;
import org.peerdirect.ib.core.testing.TestDmaDevice;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.umem.impl.Umem;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.peermem.PeerMemoryStatistics;

class PeerMemoryControllerTest {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
    static final int ALLOW_INVAL = UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP;

    @TempDir
    Path tmp;
    Rig rig;

    @BeforeEach
    void up() {
        rig = new Rig(tmp);
    }

    @AfterEach
    void down() {
        rig.close();
    }

    private Recording recording(String name, long pageSize, boolean unmaps) {
        return new Recording(name, rig.client(name + "_mem", pageSize, unmaps));
    }

    private static void assertErrno(Errno errno, Runnable r) {
        KernelException e = assertThrows(KernelException.class, r::run);
        assertEquals(errno, e.errno(), e.getMessage());
    }

    private static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 7 + seed);
        }
        return b;
    }

    /** Device writes a pattern through the MR; the CPU reads it back through the process. */
    private void dmaRoundTrip(Mr mr, long va, int len, int seed) {
        byte[] data = pattern(len, seed);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = a.allocate(len);
            MemorySegment.copy(data, 0, src, ValueLayout.JAVA_BYTE, 0, len);
            mr.dmaWrite(va, src, 0, len);
        }
        byte[] back = new byte[len];
        rig.proc.read(va, back, 0, len);
        assertArrayEquals(data, back, "device write visible to the CPU");
    }

    // ------------------------------------------------------------------ registration checks

    @Test
    void aClientMissingAMandatoryCallbackIsRefusedByName() {
        PeerMemoryClient half = new PeerMemoryClient() {
            public String name() {
                return "half";
            }
            public String version() {
                return "1";
            }
            public Object acquire(int pid, long addr, long size) {
                return null;
            }
            public SgTable dmaMap(Object c, org.peerdirect.kernel.dma.DmaDevice d) {
                return null;
            }
        };
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.controller.register(half, true));
        assertTrue(e.getMessage().contains("missing mandatory function get_pages"), e.getMessage());
        assertTrue(rig.controller.knownClients().isEmpty());
        assertFalse(rig.sysfs.exists(PeerMemoryController.SYSFS_DIR + "/half"));
    }

    @Test
    void namesAreCheckedAndUnique() {
        Recording a = recording("dup", 4096, false);
        rig.controller.register(a, true);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> rig.controller.register(recording("dup", 4096, false), false));
        assertTrue(e.getMessage().contains("already registered"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> rig.controller.register(recording("a/b", 4096, false), false));
        assertTrue(e.getMessage().contains("invalid"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> rig.controller.register(recording("x".repeat(64), 4096, false), false));
        assertTrue(e.getMessage().contains("63"), e.getMessage());
    }

    // ------------------------------------------------------------------ the two paths

    @Test
    void anonymousMemoryTakesThePinnedPath() {
        long va = rig.proc.mmap(1 << 20);
        Mr mr = rig.dev.reg(rig.proc, va + 100, 300_000, RW);
        assertFalse(mr.umem().isPeer());
        assertEquals(Umem.numPages(va + 100, 300_000), rig.proc.pinnedPages(), "pinned pages charged to memlock");
        dmaRoundTrip(mr, va + 100, 300_000, 1);
        rig.dev.dereg(mr);
        assertEquals(0, rig.proc.pinnedPages());
    }

    @Test
    void aDeviceMappingWithoutPeerClientsFailsWithThePinError() {
        ExamplePeerMemory mem = rig.client("unregistered", 4096, false);
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        KernelException e = assertThrows(KernelException.class, () -> rig.dev.reg(rig.proc, va, 4096, RW));
        assertEquals(Errno.EFAULT, e.errno());
        assertTrue(e.getMessage().contains("VM_IO|VM_PFNMAP"), e.getMessage());
        assertEquals(0, rig.proc.pinnedPages(), "charge returned");
    }

    /** Issue 10 defect 2: a killed process's device memory went for good ("free" got EINVAL). */
    @Test
    void aKilledProcessesAllocationsAreFreedByTheClient() {
        ExamplePeerMemory mem = rig.client("exit_mem", 4096, false);
        rig.controller.register(mem, false);
        AddressSpace victim = rig.mm.createProcess("victim");
        long free = rig.mm.freeFrames();
        mem.alloc(victim.pid(), 1 << 22);
        assertEquals(free - 1024, rig.mm.freeFrames());
        assertEquals(1, victim.openFiles(), "the client's device file");

        victim.exit(); // kernel:kill

        assertEquals(List.of(), mem.list(), "no allocation left");
        assertEquals(free, rig.mm.freeFrames(), "the 4 MiB are back");
    }

    /**
     * Without invalidation, memory still registered when its process dies is orphaned, not freed
     * under the device: the last deregistration frees it (nv-p2p persistent pages behave so).
     */
    @Test
    void aDeadProcessesRegisteredMemoryGoesWithItsLastRegistration() {
        ExamplePeerMemory mem = rig.client("orphan_mem", 4096, false);
        rig.controller.register(mem, false);
        AddressSpace victim = rig.mm.createProcess("victim");
        victim.setMemlockLimit(1L << 30);
        long free = rig.mm.freeFrames();
        // the device's file is opened first, so the process's exit closes the client's file first
        long anon = victim.mmap(4096);
        Mr first = rig.dev.reg(victim, anon, 4096, RW);
        long va = mem.alloc(victim.pid(), 1 << 16);
        Mr mr = rig.dev.reg(victim, va, 1 << 16, RW);

        victim.exit();

        assertNotNull(mr.revokedReason(), "the MR went with the process");
        assertNotNull(first.revokedReason());
        assertEquals(List.of(), mem.list());
        assertEquals(free, rig.mm.freeFrames(), "the orphan was freed by the deregistration");
    }

    @Test
    void peerPathRegistersDmaAndCountsExactlyAsTheKernel() throws Exception {
        Recording c = recording("example_peer", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 20);
        Mr mr = rig.dev.reg(rig.proc, va + 10, 50_000, RW);
        IbUmem u = mr.umem();
        assertTrue(u.isPeer());
        assertEquals("example_peer", u.peerClientName());
        assertEquals(0, u.ticket(), "first ticket of the client");
        assertEquals(List.of("acquire", "getPages", "dmaMap", "getPageSize"), c.calls);
        assertEquals(Umem.numPages(va + 10, 50_000), rig.proc.pinnedPages(), "peer umem keeps the memlock charge");
        dmaRoundTrip(mr, va + 10, 50_000, 2);

        PeerMemoryStatistics s = reg.statistics();
        assertEquals(new PeerMemoryStatistics("2.1", 1, 0, 13, 0, 50_000, 0, 0), s, "13 entries of 4 KiB for 0x..00a+50000");
        String dir = PeerMemoryController.SYSFS_DIR + "/example_peer/";
        assertEquals("13\n", rig.sysfs.read(dir + "num_reg_pages"));
        assertEquals("50000\n", rig.sysfs.read(dir + "num_reg_bytes"));
        assertEquals("2.1\n", rig.sysfs.read(dir + "version"));
        rig.sysfs.sync();
        assertEquals("1\n", Files.readString(rig.sysfs.root().resolve(dir + "num_alloc_mrs")), "mirrored as a plain file");
        assertEquals(1L, rig.mbeans.getAttribute(PeerMemoryController.objectName("example_peer"), "NumAllocMrs"));

        rig.dev.dereg(mr);
        assertEquals(List.of("acquire", "getPages", "dmaMap", "getPageSize", "dmaUnmap", "putPages", "release"), c.calls);
        assertEquals(new PeerMemoryStatistics("2.1", 1, 1, 13, 13, 50_000, 50_000, 0), reg.statistics());
        reg.unregister();
        assertFalse(rig.sysfs.exists(PeerMemoryController.SYSFS_DIR + "/example_peer"), "statistics go with the client");
        assertFalse(rig.mbeans.isRegistered(PeerMemoryController.objectName("example_peer")));
    }

    @Test
    void clientsAreAskedInRegistrationOrderAndTheFirstClaimWins() {
        ExamplePeerMemory mem = rig.client("shared", 4096, false);
        Recording first = new Recording("first", mem);
        Recording second = new Recording("second", mem);
        Recording notMine = recording("not_mine", 4096, false);
        rig.controller.register(notMine, true);
        rig.controller.register(first, true);
        rig.controller.register(second, true);
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 1 << 16, RW);
        assertEquals("first", mr.umem().peerClientName());
        assertEquals(List.of("acquire"), notMine.calls, "asked first, declined");
        assertEquals(List.of(), second.calls, "never asked: an earlier client claimed the range");
        rig.dev.dereg(mr);
    }

    @Test
    void invalidatingClientsAreSkippedForCallersWithoutInvalidationSupport() {
        Recording inval = recording("inval", 4096, false);
        rig.controller.register(inval, true);
        long va = ((ExamplePeerMemory) inval.inner).alloc(rig.proc.pid(), 1 << 16);
        KernelException e = assertThrows(KernelException.class,
                () -> rig.umems.umemGet(rig.proc, rig.dev, va, 4096, RW, UmemService.IB_PEER_MEM_ALLOW));
        assertEquals(Errno.EFAULT, e.errno(), "the pin error");
        assertEquals(List.of(), inval.calls, "not even asked");
        // a client without invalidation serves such a caller, and gets no ticket
        Recording persistent = new Recording("persistent", inval.inner);
        rig.controller.register(persistent, false);
        IbUmem u = rig.umems.umemGet(rig.proc, rig.dev, va, 4096, RW, UmemService.IB_PEER_MEM_ALLOW);
        assertEquals("persistent", u.peerClientName());
        assertEquals(PeerMemoryRegistry.NO_INVALIDATION_ID, u.ticket());
        u.activateInvalidationNotifier(x -> {
            throw new AssertionError("never called");
        });
        IllegalStateException ise = assertThrows(IllegalStateException.class, () -> persistent.registration.invalidate(0));
        assertTrue(ise.getMessage().contains("without an invalidation callback"), ise.getMessage());
        u.stopInvalidationNotifier();
        u.release();
    }

    @Test
    void anAcquireThatThrowsIsNotMineAndLogged() {
        Recording bad = recording("throws", 4096, false);
        bad.failAcquire = new IllegalStateException("boom");
        Recording good = new Recording("good", bad.inner);
        rig.controller.register(bad, true);
        rig.controller.register(good, true);
        long va = ((ExamplePeerMemory) bad.inner).alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 4096, RW);
        assertEquals("good", mr.umem().peerClientName());
        assertTrue(rig.warnings.stream().anyMatch(w -> w.contains("throws") && w.contains("boom") && w.contains("not mine")), rig.warnings.toString());
        rig.dev.dereg(mr);
    }

    // ------------------------------------------------------------------ error unwinding

    @Test
    void getPagesFailureUnwindsTicketThenRelease() {
        Recording c = recording("gp", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        c.failGetPages = new KernelException(Errno.ENOMEM, "device out of BAR space");
        KernelException e = assertThrows(KernelException.class, () -> rig.dev.reg(rig.proc, va, 8192, RW));
        assertEquals(Errno.ENOMEM, e.errno(), "the client's errno is kept");
        assertTrue(e.getMessage().contains("get_pages failed"), e.getMessage());
        assertEquals(List.of("acquire", "getPages", "release"), c.calls);
        assertEquals(0, rig.proc.pinnedPages());
        reg.invalidate(0); // the ticket was erased: it only counts
        assertEquals(new PeerMemoryStatistics("2.1", 0, 0, 0, 0, 0, 0, 1), reg.statistics());
        reg.unregister(); // no use count leaked: returns at once
    }

    @Test
    void dmaMapFailureUnwindsPutPagesThenRelease() {
        Recording c = recording("dm", 4096, false);
        rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        c.failDmaMap = new RuntimeException("IOMMU busy");
        KernelException e = assertThrows(KernelException.class, () -> rig.dev.reg(rig.proc, va, 8192, RW));
        assertEquals(Errno.EFAULT, e.errno());
        assertEquals(List.of("acquire", "getPages", "dmaMap", "putPages", "release"), c.calls);
    }

    @Test
    void aMisalignedTableIsRefusedAndUnmapped() {
        Recording c = recording("mis", 4096, false);
        rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        c.badTable = SgTable.of(new long[] {0x1_0000_0100L}, new long[] {8192});
        KernelException e = assertThrows(KernelException.class, () -> rig.dev.reg(rig.proc, va, 8192, RW));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("not aligned"), e.getMessage());
        assertEquals(List.of("acquire", "getPages", "dmaMap", "getPageSize", "dmaUnmap", "putPages", "release"), c.calls);
    }

    @Test
    void memlockIsCheckedBeforeAnyClientIsAsked() {
        Recording c = recording("ml", 4096, false);
        rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 20);
        rig.proc.setMemlockLimit(64 << 10);
        assertErrno(Errno.ENOMEM, () -> rig.dev.reg(rig.proc, va, 1 << 20, RW));
        assertEquals(List.of(), c.calls);
        rig.proc.setMemlockLimit(1L << 40);
    }

    // ------------------------------------------------------------------ page size

    @Test
    void largePeerPagesAreTrimmedToThePageAlignedUserRange() {
        Recording c = recording("gpu_like", 65536, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 4 << 16);
        long start = va + 0x5123; // inside the first 64 KiB granule
        int len = 0x20000;        // ends inside the third granule
        Mr mr = rig.dev.reg(rig.proc, start, len, RW);
        SgTable b = mr.umem().dmaBlocks();
        assertEquals(3, b.nents(), "one entry per 64 KiB granule");
        assertEquals(mr.umem().npages() * 4096, b.totalLength(), "exactly the 4 KiB-aligned range");
        assertEquals(0x10000 - 0x5000, b.length(0), "first granule trimmed to the page of the start");
        assertEquals(3, reg.statistics().numRegPages(), "num_reg_pages counts entries, not 4 KiB pages");
        dmaRoundTrip(mr, start, len, 3);
        rig.dev.dereg(mr);
    }

    // ------------------------------------------------------------------ invalidation

    @Test
    void invalidationRevokesTheMrUnmapsAndLetsTheClientFreeItsMemory() {
        Recording c = recording("inv", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        ExamplePeerMemory mem = (ExamplePeerMemory) c.inner;
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 1 << 16, RW);
        dmaRoundTrip(mr, va, 1 << 16, 4);
        c.calls.clear();
        mem.free(rig.proc.pid(), va); // invalidates, then frees the frames (the IOMMU audit would catch a live mapping)
        assertEquals(List.of("dmaUnmap", "putPages"), c.calls, "the core unmaps inside the invalidation");
        assertEquals(1, mr.invalidations());
        assertTrue(mr.umem().invalidated());
        TestDmaDevice.DmaRefused r = assertThrows(TestDmaDevice.DmaRefused.class, () -> dmaRoundTrip(mr, va, 64, 5));
        assertTrue(r.getMessage().contains("revoked"), r.getMessage());
        assertEquals(new PeerMemoryStatistics("2.1", 1, 1, 16, 16, 1 << 16, 1 << 16, 1), reg.statistics());
        rig.dev.dereg(mr); // only the remaining cleanup
        assertEquals(List.of("dmaUnmap", "putPages", "release"), c.calls);
        assertEquals(new PeerMemoryStatistics("2.1", 1, 1, 16, 16, 1 << 16, 1 << 16, 1), reg.statistics(), "nothing counted twice");
    }

    @Test
    void invalidateUnmapsClientsUnmapThemselves() {
        Recording c = recording("unmaps", 4096, true);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        ExamplePeerMemory mem = (ExamplePeerMemory) c.inner;
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 1 << 16, RW);
        c.calls.clear();
        assertEquals(1, mem.invalidate(rig.proc.pid(), va));
        assertEquals(List.of(), c.calls, "INVALIDATE_UNMAPS: the core neither unmaps nor puts pages");
        assertEquals(MappedState.INVALIDATED, ((PeerUmem) mr.umem()).stateForTests());
        assertEquals(new PeerMemoryStatistics("2.1", 1, 1, 16, 0, 1 << 16, 0, 1), reg.statistics(), "dealloc at invalidation, dereg later");
        assertEquals(0, rig.dev.iommuDomain().mappedPages(), "the client unmapped after the callback returned");
        rig.dev.dereg(mr);
        assertEquals(List.of("release"), c.calls);
        assertEquals(new PeerMemoryStatistics("2.1", 1, 1, 16, 16, 1 << 16, 1 << 16, 1), reg.statistics());
    }

    @Test
    void aStaleOrUnknownTicketOnlyCounts() {
        Recording c = recording("stale", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 4096, RW);
        long t = mr.umem().ticket();
        rig.dev.dereg(mr);
        c.calls.clear();
        reg.invalidate(t);
        reg.invalidate(123_456);
        assertEquals(List.of(), c.calls);
        assertEquals(2, reg.statistics().numFreeCallbacks());
        assertEquals(1, reg.statistics().numDeallocMrs());
    }

    @Test
    void ticketsAreCyclicIdsBelowU32Max() {
        Recording c = recording("cyc", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        ((PeerClient) reg).setCyclicNext(PeerMemoryRegistry.NO_INVALIDATION_ID - 1);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        Mr a = rig.dev.reg(rig.proc, va, 4096, RW);
        Mr b = rig.dev.reg(rig.proc, va + 4096, 4096, RW);
        Mr d = rig.dev.reg(rig.proc, va + 8192, 4096, RW);
        assertEquals(0xFFFF_FFFEL, a.umem().ticket());
        assertEquals(0, b.umem().ticket(), "wraps to 0, never U32_MAX");
        assertEquals(1, d.umem().ticket());
        rig.dev.dereg(b);
        ((PeerClient) reg).setCyclicNext(0);
        Mr e = rig.dev.reg(rig.proc, va + 8192, 4096, RW);
        assertEquals(0, e.umem().ticket(), "a free id is reused");
        for (Mr m : List.of(a, d, e)) {
            rig.dev.dereg(m);
        }
    }

    // ------------------------------------------------------------------ the fence

    private static void awaitBlocked(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(t.isAlive(), "thread ended instead of blocking");
            assertTrue(System.nanoTime() < deadline, "thread did not block within 10 s: " + t.getState());
            Thread.onSpinWait();
        }
    }

    @Test
    void anInvalidationDuringRegistrationWaitsForActivation() throws Exception {
        Recording c = recording("fence", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        IbUmem u = rig.umems.umemGet(rig.proc, rig.dev, va, 8192, RW, ALLOW_INVAL);
        AtomicInteger func = new AtomicInteger();
        Thread inv = Thread.ofPlatform().start(() -> reg.invalidate(u.ticket()));
        awaitBlocked(inv);
        assertEquals(0, func.get());
        assertFalse(c.calls.contains("dmaUnmap"), "nothing unmapped while the registration is being built");
        u.activateInvalidationNotifier(x -> func.incrementAndGet());
        inv.join(10_000);
        assertFalse(inv.isAlive());
        assertEquals(1, func.get(), "the driver's function ran once the notifier was armed");
        assertTrue(u.invalidated());
        u.stopInvalidationNotifier();
        u.release();
        assertThrows(IllegalStateException.class, u::release, "released twice");
    }

    @Test
    void anInvalidationDuringAFailedRegistrationFindsNothingToDo() throws Exception {
        Recording c = recording("fence2", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        IbUmem u = rig.umems.umemGet(rig.proc, rig.dev, va, 8192, RW, ALLOW_INVAL);
        Thread inv = Thread.ofPlatform().start(() -> reg.invalidate(u.ticket()));
        awaitBlocked(inv);
        c.calls.clear();
        u.stopInvalidationNotifier(); // the driver failed to build the MR: it never activates
        inv.join(10_000);
        assertFalse(inv.isAlive());
        assertEquals(List.of("dmaUnmap", "putPages"), c.calls, "unmapped once, by the stop");
        u.release();
        assertEquals(1, reg.statistics().numDeallocMrs());
        assertThrows(IllegalStateException.class, () -> u.activateInvalidationNotifier(x -> { }));
    }

    // ------------------------------------------------------------------ unregister

    @Test
    void unregisterWaitsForLiveRegistrationsLogsThemAndThenNoCallbackComes() throws Exception {
        Recording c = recording("leaving", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 8192, RW);
        assertFalse(reg.unregister(Duration.ofMillis(50)), "a live MR holds the client");
        assertTrue(rig.controller.clients().isEmpty(), "but it is no longer brokered");
        assertErrno(Errno.EFAULT, () -> rig.dev.reg(rig.proc, va + 8192, 4096, RW));
        Thread t = Thread.ofPlatform().start(reg::unregister);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (rig.warnings.stream().noneMatch(w -> w.contains("unregister waits for 1 registration") && w.contains("ticket 0"))) {
            assertTrue(System.nanoTime() < deadline, "the wait is logged with the registration: " + rig.warnings);
            Thread.onSpinWait();
        }
        assertTrue(t.isAlive());
        rig.dev.dereg(mr); // another thread deregisters: unregister returns
        t.join(10_000);
        assertFalse(t.isAlive());
        c.unregistered = true;
        ((ExamplePeerMemory) c.inner).free(rig.proc.pid(), va);
        assertEquals(0, c.callsAfterUnregister.get());
        assertThrows(IllegalStateException.class, () -> reg.invalidate(0));
    }

    @Test
    void closingTheCoreRevokesLiveRegistrationsInsteadOfWaiting() {
        Recording c = recording("at_close", 4096, false);
        rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) c.inner).alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 8192, RW);
        rig.controller.close(Duration.ofSeconds(5));
        assertNotNull(mr.revokedReason());
        assertTrue(rig.controller.knownClients().isEmpty());
        assertThrows(TestDmaDevice.DmaRefused.class, () -> dmaRoundTrip(mr, va, 64, 6));
        assertEquals(0, rig.dev.iommuDomain().mappedPages());
        rig.dev.dereg(mr); // the driver's own dereg finds an unmapped umem
        assertThrows(IllegalStateException.class, () -> rig.controller.register(recording("late", 4096, false), true));
    }

    @Test
    void readOnlyRegistrationsAskForForce() {
        PeerMemoryClient inner = rig.client("ro_mem", 4096, false);
        boolean[] force = new boolean[1];
        Recording c = new Recording("ro", inner) {
            @Override
            public void getPages(long addr, long size, boolean write, boolean f, Object ctx, long core) {
                force[0] = f;
                assertTrue(write, "write is always requested");
                super.getPages(addr, size, write, f, ctx, core);
            }
        };
        rig.controller.register(c, true);
        long va = ((ExamplePeerMemory) inner).alloc(rig.proc.pid(), 1 << 16);
        Mr mr = rig.dev.reg(rig.proc, va, 4096, IbAccess.REMOTE_READ);
        assertTrue(force[0]);
        assertNull(mr.revokedReason());
        rig.dev.dereg(mr);
    }
}
