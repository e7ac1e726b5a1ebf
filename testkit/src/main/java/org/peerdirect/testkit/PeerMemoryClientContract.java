package org.peerdirect.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryStatistics;
import org.peerdirect.kernel.dma.SgTable;

/**
 * The peer-memory client contract kit ({@code reference/PEER_MEMORY.md}): extend it with a factory
 * for your client and hooks to allocate, free and invalidate its memory; JUnit 5 runs the contract
 * against a real IB core and a DMA device whose every access goes through the IOMMU, and every test
 * ends with the machine's audit.
 *
 * <p>Checked: registration with the core (mandatory callbacks), {@code acquire} claiming the
 * client's memory and nothing else, {@code dma_map}'s table (page-aligned entries covering the
 * range, mapping the bytes the CPU sees), statistics of a registration and its deregistration,
 * invalidation (after it returns the device's mapping is gone and the driver's function ran),
 * {@code unregister} waiting for live registrations, and invalidation racing deregistration.
 */
public abstract class PeerMemoryClientContract {

    private static final int FLAGS = UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP;

    @TempDir
    protected Path tmp;
    protected Machine machine;
    protected AddressSpace process;
    protected IommuDomain domain;
    protected DmaDevice dma;
    protected PeerMemoryClient client;
    private PeerMemoryRegistration registration;

    /** The client under test, over this machine's memory. */
    protected abstract PeerMemoryClient createClient(Machine m);

    /** Allocates {@code bytes} of the client's memory mapped into {@code p}; its address. */
    protected abstract long alloc(AddressSpace p, long bytes);

    /** Frees what {@link #alloc} returned. */
    protected abstract void free(AddressSpace p, long va);

    /**
     * Makes the client invalidate the registrations over {@code va} (its invalidation path, e.g. a
     * free callback) and returns when that path returned.
     */
    protected abstract void invalidate(AddressSpace p, long va);

    /**
     * Puts {@code data} into the client's memory at {@code va} (default: CPU stores through the
     * process's mapping; a GPU client copies with its copy engine, as its memory is not CPU-visible).
     */
    protected void write(AddressSpace p, long va, byte[] data) {
        p.write(va, data, 0, data.length);
    }

    /** Whether the client is registered with an invalidation callback (default true). */
    protected boolean invalidationRequired() {
        return true;
    }

    /** Bytes allocated per test (default 1 MiB); a multiple of the client's page size. */
    protected long allocationSize() {
        return 1 << 20;
    }

    /** Iterations of the race test (default 200). */
    protected int raceIterations() {
        return Integer.getInteger("peermem.contract.iterations", 200);
    }

    @BeforeEach
    void machineUp() {
        machine = Machine.builder(tmp).build();
        process = machine.process("contract");
        domain = machine.domain("contract_dma0");
        dma = Machine.dmaDevice(domain);
        client = createClient(machine);
        registration = machine.peerMemory().register(client, invalidationRequired());
    }

    @AfterEach
    void machineDown() throws InterruptedException {
        try {
            assertTrue(registration.unregister(Duration.ofSeconds(10)), "unregister completes once nothing uses the client");
        } finally {
            machine.close(); // the audit
        }
    }

    /** The driver's deregistration order: stop the notifier, then release. */
    private static void deregister(IbUmem u) {
        u.stopInvalidationNotifier();
        u.release();
    }

    private IbUmem register(long va, long len) {
        return machine.umems().umemGet(process, dma, va, len, IbAccess.LOCAL_WRITE, FLAGS);
    }

    @Test
    void theCoreAcceptsTheClient() {
        assertEquals(client.name(), registration.name());
        assertEquals(invalidationRequired(), registration.invalidationRequired());
        assertNotNull(registration.statistics().version(), "version");
    }

    @Test
    void acquireClaimsTheClientsMemoryAndNothingElse() {
        long len = allocationSize();
        long va = alloc(process, len);
        IbUmem u = register(va, len);
        assertTrue(u.isPeer(), "the client's memory is peer memory");
        assertEquals(client.name(), u.peerClientName());
        deregister(u);
        long anon = process.mmap(1 << 16);
        process.populate(anon, 1 << 16, true);
        IbUmem pinned = register(anon, 1 << 16);
        assertFalse(pinned.isPeer(), "ordinary memory is pinned, not claimed by the client");
        deregister(pinned);
        process.munmap(anon, 1 << 16);
        free(process, va);
    }

    @Test
    void dmaMapCoversTheRangeWithPageAlignedEntriesThatMapTheCpusBytes() {
        long len = allocationSize();
        long va = alloc(process, len);
        long off = 4096 + 100;
        byte[] data = new byte[256];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7 + 1);
        }
        write(process, va + off, data);
        IbUmem u = register(va, len);
        SgTable t = u.dmaBlocks();
        long total = 0;
        for (int i = 0; i < t.nents(); i++) {
            assertEquals(0, t.dmaAddress(i) % SgTable.PAGE_SIZE, "entry " + i + " starts on a page");
            assertEquals(0, t.length(i) % SgTable.PAGE_SIZE, "entry " + i + " ends on a page");
            total += t.length(i);
        }
        assertEquals(len, total, "the entries cover the registration");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment got = a.allocate(data.length);
            domain.read(u.dmaAddressOf(va + off), got, 0, data.length);
            for (int i = 0; i < data.length; i++) {
                assertEquals(data[i], got.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i), "byte " + i + " through the device's mapping");
            }
        }
        deregister(u);
        free(process, va);
    }

    @Test
    void statisticsCountARegistrationAndItsDeregistration() {
        long len = allocationSize();
        long va = alloc(process, len);
        PeerMemoryStatistics before = registration.statistics();
        deregister(register(va, len));
        PeerMemoryStatistics after = registration.statistics();
        assertEquals(1, after.numAllocMrs() - before.numAllocMrs(), "num_alloc_mrs");
        assertEquals(1, after.numDeallocMrs() - before.numDeallocMrs(), "num_dealloc_mrs");
        assertEquals(len, after.numRegBytes() - before.numRegBytes(), "num_reg_bytes");
        assertEquals(after.numRegBytes() - before.numRegBytes(), after.numDeregBytes() - before.numDeregBytes(), "num_dereg_bytes");
        assertEquals(after.numRegPages() - before.numRegPages(), after.numDeregPages() - before.numDeregPages(), "num_dereg_pages");
        free(process, va);
    }

    @Test
    void afterTheInvalidationReturnsTheDeviceMappingIsGone() {
        if (!invalidationRequired()) {
            return; // a persistent client never invalidates
        }
        long len = allocationSize();
        long va = alloc(process, len);
        IbUmem u = register(va, len);
        AtomicInteger calls = new AtomicInteger();
        u.activateInvalidationNotifier(x -> calls.incrementAndGet());
        assertTrue(domain.mappedPages() > 0);
        invalidate(process, va);
        assertEquals(1, calls.get(), "the driver's invalidate function ran once");
        assertTrue(u.invalidated());
        assertEquals(0, domain.mappedPages(), "no DMA mapping survives the invalidation");
        deregister(u);
        free(process, va);
    }

    @Test
    void unregisterWaitsForLiveRegistrations() throws InterruptedException {
        long len = allocationSize();
        long va = alloc(process, len);
        IbUmem u = register(va, len);
        assertFalse(registration.unregister(Duration.ofMillis(50)), "a live registration holds the client");
        KernelException e = assertThrows(KernelException.class, () -> register(va, len),
                "an unregistering client is no longer brokered");
        assertEquals(KernelException.Errno.EFAULT, e.errno(), "device memory nobody claims cannot be pinned either: " + e.getMessage());
        deregister(u);
        assertTrue(registration.unregister(Duration.ofSeconds(10)), "released: unregister completes");
        free(process, va);
        registration = machine.peerMemory().register(client, invalidationRequired()); // for machineDown
    }

    @Test
    void invalidationRacingDeregistrationNeverLeaks() throws Exception {
        if (!invalidationRequired()) {
            return;
        }
        long len = allocationSize();
        for (int i = 0; i < raceIterations(); i++) {
            long va = alloc(process, len);
            IbUmem u = register(va, len);
            u.activateInvalidationNotifier(x -> {
            });
            CountDownLatch go = new CountDownLatch(1);
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread t = Thread.ofPlatform().start(() -> {
                try {
                    go.await();
                    invalidate(process, va);
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            go.countDown();
            deregister(u);
            t.join(10_000);
            assertFalse(t.isAlive(), "the invalidation returned");
            if (failed.get() != null) {
                throw new AssertionError("iteration " + i + ": the invalidation failed", failed.get());
            }
            assertEquals(0, domain.mappedPages(), "iteration " + i + ": no mapping left");
            free(process, va);
        }
    }
}
