package org.peerdirect.kernel.pci.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.peerdirect.kernel.pci.BarWriteHandler;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The bus without OSGi. Waits are latches and queues with a bound (5 s, or 30 s for the stress
 * test); the only timed negative check polls a thread's state, never sleeps.
 */
class PciBusCoreTest {

    private static final long WAIT_S = 5;

    /** Every warning the bus logged; a test that expects none checks it is empty. */
    private final List<String> warnings = Collections.synchronizedList(new ArrayList<>());
    private final List<String> events = Collections.synchronizedList(new ArrayList<>());
    private final PciBusCore core = new PciBusCore(new PciBusCore.Listener() {
        @Override
        public void added(PciFunction f) {
            events.add("added " + f.bdf());
        }

        @Override
        public void removed(PciFunction f) {
            events.add("removed " + f.bdf());
        }
    }, warnings::add);

    @AfterEach
    void shutDown() {
        core.close();
        assertEquals(List.of(), irqThreads(""), "close() leaves no IRQ thread behind");
    }

    private static PciDeviceSpec.Builder cx4() {
        return PciDeviceSpec.builder("ConnectX-4").vendorId(0x15b3).deviceId(0x1013).classCode(0x020700);
    }

    private PciFunction register(BarWriteHandler bar0Writes) {
        return core.register(cx4().bar(0, 1 << 20, bar0Writes).bar(2, 4096).msixVectors(8).build());
    }

    /** Names of live IRQ threads of the function at {@code bdf} ("" for any). */
    private static List<String> irqThreads(String bdf) {
        return Thread.getAllStackTraces().keySet().stream().map(Thread::getName)
                .filter(n -> n.startsWith("irq/") && n.endsWith(bdf)).sorted().toList();
    }

    private static void refused(Executable e, String... parts) {
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
        for (String p : parts) {
            assertTrue(x.getMessage().contains(p), () -> "'" + p + "' missing from: " + x.getMessage());
        }
    }

    // ---------------------------------------------------------------- registration

    @Test
    void functionsGetIncreasingBusAddressesFrom03AndArePublished() {
        PciFunction a = register(null);
        PciFunction b = core.register(PciDeviceSpec.builder("NVMe SSD").vendorId(0x144d).deviceId(0xa808)
                .classCode(0x010802).bar(0, 16384).build());
        assertEquals("0000:03:00.0", a.bdf());
        assertEquals("0000:04:00.0", b.bdf());
        assertEquals(List.of(a, b), core.functions());
        assertEquals(List.of("added 0000:03:00.0", "added 0000:04:00.0"), events);
        assertEquals(0x15b3, a.vendorId());
        assertEquals(0x1013, a.deviceId());
        assertEquals(0x020700, a.classCode());
        assertEquals("ConnectX-4", a.name());
        assertEquals(1 << 20, a.barSize(0));
        assertEquals(0, a.barSize(1), "an unimplemented BAR has size 0, as pci_resource_len says");
        assertEquals(8, a.msixVectors());
        assertTrue(a.present());

        a.remove();
        PciFunction c = register(null);
        assertEquals("0000:05:00.0", c.bdf(), "addresses are never reused");
        assertEquals(List.of(b, c), core.functions());
    }

    @Test
    void busNumbersRunUpTo0xffThenContinueInTheNextDomain() {
        assertEquals("0000:03:00.0", PciBusCore.bdf(0));
        assertEquals("0000:ff:00.0", PciBusCore.bdf(252));
        assertEquals("0001:03:00.0", PciBusCore.bdf(253));
    }

    // ---------------------------------------------------------------- MMIO

    @Test
    void badMmioArgumentsNameTheBarTheOffsetAndTheSize() {
        PciFunction f = register(null);
        refused(() -> f.read32(0, 2), "bar 0", "offset 0x2", "not aligned", "size 0x100000");
        refused(() -> f.write64(0, 4, 1), "bar 0", "offset 0x4", "8-byte", "size 0x100000");
        refused(() -> f.read32(0, 1 << 20), "bar 0", "offset 0x100000", "outside", "size 0x100000");
        refused(() -> f.read64(2, 4096 - 4), "bar 2", "offset 0xffc", "outside", "size 0x1000");
        refused(() -> f.write32be(0, -4, 1), "bar 0", "offset 0xfffffffffffffffc", "outside");
        refused(() -> f.read32(1, 0), "bar 1", "not implemented", "size 0");
        refused(() -> f.write32(6, 0, 0), "bar 6", "0..5");
        refused(() -> f.barMemory(3), "bar 3", "not implemented");
        f.remove();
        refused(() -> f.read32(0, 2), "bar 0", "offset 0x2", "not aligned");
    }

    @Test
    void ioremapMapsWholePagesOfAMemoryBarAndNamesWhatIsWrong() {
        PciFunction f = register(null);
        MemorySegment cpu = f.ioremap(0, 8192, 4096);
        assertEquals(4096, cpu.byteSize());
        cpu.set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 4, 0x5a5a1234);
        assertEquals(0x5a5a1234, f.read32(0, 8192 + 4), "a CPU store through the mapping is what MMIO reads");
        f.write32(0, 8192 + 8, 77);
        assertEquals(77, cpu.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 8));
        refused(() -> f.ioremap(0, 100, 4096), "bar 0", "0x64", "whole 4 KiB pages");
        refused(() -> f.ioremap(0, (1 << 20) - 4096, 8192), "bar 0", "leaves the BAR");
        refused(() -> f.ioremap(3, 0, 4096), "bar 3", "not implemented");
        f.remove();
        assertThrows(IllegalStateException.class, () -> cpu.get(ValueLayout.JAVA_INT_UNALIGNED, 0), "the mapping dies with the function");
    }

    @Test
    void ioremapOfAnApertureMapsOnlyAWindowTheDeviceKeepsWhole() {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment window = arena.allocate(1 << 16, 4096);
            boolean[] mapped = {true};
            // a PMR: the whole BAR behind one window, from the page asked to its end; a BAR1 page: one page only
            PciFunction f = core.register(cx4().aperture(2, 1 << 16, off -> mapped[0] ? window.asSlice(off) : null)
                    .aperture(4, 1 << 16, off -> window.asSlice(off, 4096)).build());
            MemorySegment cpu = f.ioremap(2, 8192, 16384);
            cpu.set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 12, 0x1234abcd);
            assertEquals(0x1234abcd, f.read32(2, 8192 + 12), "a CPU store through the mapping is what MMIO reads");
            refused(() -> f.ioremap(4, 0, 8192), "bar 4", "pages move");
            assertEquals(4096, f.ioremap(4, 4096, 4096).byteSize(), "one page of a moving aperture is one window");
            refused(() -> f.ioremap(2, 1 << 16, 4096), "bar 2", "leaves the BAR");
            mapped[0] = false;
            refused(() -> f.ioremap(2, 0, 4096), "bar 2", "nothing mapped");
            f.remove();
        }
    }

    @Test
    void littleAndBigEndianAccessesRoundTripAndLandInBarMemoryInTheirByteOrder() {
        PciFunction f = register(null);
        MemorySegment bar = f.barMemory(0);
        f.write32(0, 0x10, 0x11223344);
        assertEquals(0x11223344, f.read32(0, 0x10));
        assertEquals(0x44, bar.get(ValueLayout.JAVA_BYTE, 0x10), "writel stores the low byte first");
        assertEquals(0x11, bar.get(ValueLayout.JAVA_BYTE, 0x13));
        assertEquals(0x44332211, f.read32be(0, 0x10));

        f.write32be(0, 0x20, 0x11223344);
        assertEquals(0x11, bar.get(ValueLayout.JAVA_BYTE, 0x20), "iowrite32be stores the high byte first");
        assertEquals(0x11223344, f.read32be(0, 0x20));
        assertEquals(0x11223344, bar.get(ValueLayout.JAVA_INT.withOrder(ByteOrder.BIG_ENDIAN), 0x20));

        f.write64(0, 0x28, 0x0102030405060708L);
        assertEquals(0x0102030405060708L, f.read64(0, 0x28));
        assertEquals(0x08, bar.get(ValueLayout.JAVA_BYTE, 0x28));
        assertEquals(0x05060708, f.read32(0, 0x28));
        assertEquals(0x01020304, f.read32(0, 0x2c));

        // the device side writes, the driver reads: the mlx5 init segment's firmware revision is big-endian
        bar.set(ValueLayout.JAVA_INT.withOrder(ByteOrder.BIG_ENDIAN), 0, 0x000e0010);
        assertEquals(0x000e0010, f.read32be(0, 0));
        long end = (1 << 20) - 8;
        bar.set(ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN), end, -2L);
        assertEquals(-2L, f.read64(0, end), "the last aligned quadword of the BAR is reachable");
        assertEquals(0, f.read32(2, 0), "BAR memory starts zeroed");
    }

    @Test
    void barWriteHandlersSeeOffsetWidthAndValueAfterTheWriteLanded() {
        BlockingQueue<String> seen = new LinkedBlockingQueue<>();
        AtomicReference<PciFunction> self = new AtomicReference<>();
        PciFunction f = register((bar, offset, width, value) -> {
            // the bytes are already in BAR memory when the device model hears of the write
            int inMemory = self.get().barMemory(bar).get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), offset);
            seen.add(String.format("bar%d +0x%x w%d 0x%x mem 0x%x", bar, offset, width, value, inMemory));
        });
        self.set(f);
        f.write32(0, 0x800, 0xdeadbeef);
        f.write64(0, 0x808, 0x1122334455667788L);
        f.write32be(0, 0x810, 0x01020304);
        f.read32(0, 0x800);
        f.write32(2, 0, 1); // BAR 2 has no handler
        assertEquals(List.of(
                "bar0 +0x800 w4 0xdeadbeef mem 0xdeadbeef",
                "bar0 +0x808 w8 0x1122334455667788 mem 0x55667788",
                "bar0 +0x810 w4 0x1020304 mem 0x4030201"), List.copyOf(seen), "reads and other BARs are not reported");
        assertTrue(warnings.isEmpty(), warnings::toString);
    }

    /**
     * A write-combined burst lands whole before the handler hears of it; a handler that takes
     * bursts sees one call with the payload, one that does not sees the 64-bit writes in order;
     * bad bursts name what is wrong and change nothing.
     */
    @Test
    void aWriteCombinedBurstLandsWholeAndReachesTheHandlerAsOneWriteOrAsItsWords() {
        BlockingQueue<String> seen = new LinkedBlockingQueue<>();
        AtomicReference<PciFunction> self = new AtomicReference<>();
        PciFunction f = register(new BarWriteHandler() {
            @Override
            public void written(int bar, long offset, int width, long value) {
                seen.add(String.format("+0x%x w%d 0x%x", offset, width, value));
            }

            @Override
            public void writtenBurst(int bar, long offset, MemorySegment payload, long payloadOffset, int length) {
                long last = self.get().barMemory(bar).get(ValueLayout.JAVA_LONG_UNALIGNED, offset + length - 8);
                seen.add(String.format("+0x%x burst %d first 0x%x last in BAR 0x%x", offset, length,
                        payload.get(ValueLayout.JAVA_LONG_UNALIGNED, payloadOffset), last));
            }
        });
        self.set(f);
        MemorySegment wqe = MemorySegment.ofArray(new long[] {1, 2, 3, 4, 5, 6, 7, 8});
        f.iowrite64Copy(0, 0x800, wqe, 0, 64);
        assertEquals(List.of("+0x800 burst 64 first 0x1 last in BAR 0x8"), List.copyOf(seen));
        assertEquals(5, f.read64(0, 0x820));
        seen.clear();
        f.iowrite64Copy(0, 0x840, wqe, 16, 16);
        assertEquals(List.of("+0x840 burst 16 first 0x3 last in BAR 0x4"), List.copyOf(seen), "a burst of part of a buffer");

        seen.clear();
        PciFunction g = register((bar, offset, width, value) -> seen.add(String.format("+0x%x w%d 0x%x", offset, width, value)));
        g.iowrite64Copy(0, 0x900, wqe, 0, 24);
        assertEquals(List.of("+0x900 w8 0x1", "+0x908 w8 0x2", "+0x910 w8 0x3"), List.copyOf(seen), "a burst is its words to a plain handler");

        seen.clear();
        refused(() -> f.iowrite64Copy(0, 0x800, wqe, 0, 12), "12 bytes", "whole 64-bit words");
        refused(() -> f.iowrite64Copy(0, 0xfe0, wqe, 0, 64), "crosses a 4 KiB page");
        refused(() -> f.iowrite64Copy(0, 0x804, wqe, 0, 64), "offset 0x804", "not aligned");
        refused(() -> f.iowrite64Copy(0, (1 << 20) - 64, MemorySegment.ofArray(new long[16]), 0, 128), "crosses a 4 KiB page or leaves the BAR");
        assertTrue(seen.isEmpty(), "a refused burst writes nothing: " + seen);
        f.remove();
        f.iowrite64Copy(0, 0x800, wqe, 0, 64); // dropped, as every write after removal
        assertTrue(seen.isEmpty(), seen::toString);
    }

    @Test
    void aFailingBarWriteHandlerIsLoggedNotThrownAtTheDriver() {
        PciFunction f = register((bar, offset, width, value) -> {
            throw new IllegalStateException("model bug");
        });
        f.write32(0, 0, 7);
        assertEquals(7, f.read32(0, 0), "the write landed");
        assertEquals(1, warnings.size());
        assertTrue(warnings.get(0).contains("model bug"), warnings::toString);
    }

    // ---------------------------------------------------------------- MSI-X

    @Test
    void msixIsDeliveredOnTheVectorsHandlerThreadNotTheRaisers() throws Exception {
        PciFunction f = register(null);
        BlockingQueue<String> calls = new LinkedBlockingQueue<>();
        f.requestIrq(3, v -> calls.add(Thread.currentThread().getName() + " vector " + v + " delivered " + f.msixDelivered(v)));
        assertTrue(f.irqRequested(3));
        assertEquals(List.of("irq/3-0000:03:00.0"), irqThreads("-" + f.bdf()));
        f.raiseMsix(3);
        String call = calls.poll(WAIT_S, TimeUnit.SECONDS);
        assertEquals("irq/3-0000:03:00.0 vector 3 delivered 1", call);
        assertNotEquals(Thread.currentThread().getName(), "irq/3-0000:03:00.0");
        assertEquals(1, f.msixRaised(3));
        f.freeIrq(3);
        assertFalse(f.irqRequested(3));
        assertEquals(List.of(), irqThreads("-" + f.bdf()), "free_irq ends the thread");
    }

    @Test
    void raisesWithoutAHandlerSetThePendingBitAndCoalesceIntoOneDeliveryOnRequestIrq() throws Exception {
        PciFunction f = register(null);
        f.raiseMsix(1);
        f.raiseMsix(1);
        f.raiseMsix(1);
        assertTrue(f.msixPending(1));
        assertFalse(f.msixPending(0));
        assertEquals(3, f.msixRaised(1));
        assertEquals(0, f.msixDelivered(1));

        BlockingQueue<Integer> calls = new LinkedBlockingQueue<>();
        f.requestIrq(1, calls::add);
        assertEquals(1, calls.poll(WAIT_S, TimeUnit.SECONDS), "the pending interrupt is delivered on request");
        assertFalse(f.msixPending(1));
        f.raiseMsix(1); // a fresh interrupt after the pending one: exactly one more call
        assertEquals(1, calls.poll(WAIT_S, TimeUnit.SECONDS));
        f.freeIrq(1); // waits for the thread: nothing can be delivered behind our back any more
        assertTrue(calls.isEmpty(), "three pending raises made one delivery: " + calls);
        assertEquals(4, f.msixRaised(1));
        assertEquals(2, f.msixDelivered(1));
    }

    @Test
    void raisesWhileTheHandlerRunsCauseExactlyOneMoreCall() throws Exception {
        PciFunction f = register(null);
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger calls = new AtomicInteger();
        CountDownLatch second = new CountDownLatch(1);
        f.requestIrq(0, v -> {
            if (calls.incrementAndGet() == 1) {
                entered.countDown();
                await(release);
            } else {
                second.countDown();
            }
        });
        f.raiseMsix(0);
        assertTrue(entered.await(WAIT_S, TimeUnit.SECONDS));
        f.raiseMsix(0);
        f.raiseMsix(0);
        f.raiseMsix(0);
        release.countDown();
        assertTrue(second.await(WAIT_S, TimeUnit.SECONDS), "no interrupt is lost while the handler runs");
        f.freeIrq(0);
        assertEquals(2, calls.get(), "the three raises coalesced");
        assertEquals(4, f.msixRaised(0));
        assertEquals(2, f.msixDelivered(0));
    }

    @Test
    void freeIrqReturnsOnlyAfterTheRunningHandlerFinishedAndNeverCallsItAgain() throws Exception {
        PciFunction f = register(null);
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger calls = new AtomicInteger();
        f.requestIrq(5, v -> {
            calls.incrementAndGet();
            entered.countDown();
            await(release);
        });
        f.raiseMsix(5);
        assertTrue(entered.await(WAIT_S, TimeUnit.SECONDS));

        CountDownLatch freed = new CountDownLatch(1);
        Thread freer = new Thread(() -> {
            f.freeIrq(5);
            freed.countDown();
        }, "freer");
        freer.start();
        // the freer parks in its (timed) join on the handler thread: free_irq is waiting for us
        awaitState(freer, Thread.State.TIMED_WAITING);
        assertEquals(1, freed.getCount(), "freeIrq returned while the handler was still running");
        release.countDown();
        assertTrue(freed.await(WAIT_S, TimeUnit.SECONDS));
        freer.join(TimeUnit.SECONDS.toMillis(WAIT_S));

        f.raiseMsix(5);
        assertTrue(f.msixPending(5), "a raise after free_irq only sets the pending bit");
        assertEquals(1, calls.get());
        assertEquals(List.of(), irqThreads("-" + f.bdf()));
    }

    @Test
    void aHandlerMayFreeItsOwnVectorAndAFailingHandlerStaysRequested() throws Exception {
        PciFunction f = register(null);
        CountDownLatch freedItself = new CountDownLatch(1);
        f.requestIrq(2, v -> {
            f.freeIrq(v); // cannot wait for itself: must not deadlock
            freedItself.countDown();
        });
        f.raiseMsix(2);
        assertTrue(freedItself.await(WAIT_S, TimeUnit.SECONDS));
        assertFalse(f.irqRequested(2));

        BlockingQueue<Integer> calls = new LinkedBlockingQueue<>();
        f.requestIrq(4, v -> {
            calls.add(v);
            throw new IllegalStateException("driver bug");
        });
        f.raiseMsix(4);
        assertEquals(4, calls.poll(WAIT_S, TimeUnit.SECONDS));
        f.raiseMsix(4);
        assertEquals(4, calls.poll(WAIT_S, TimeUnit.SECONDS), "the vector still works after a failing handler");
        f.freeIrq(4);
        assertEquals(2, warnings.size(), warnings::toString);
        assertTrue(warnings.get(0).contains("driver bug"), warnings::toString);
    }

    @Test
    void badVectorsNameTheVectorAndTheCountAndDoubleRequestsAreRefused() {
        PciFunction f = register(null);
        refused(() -> f.requestIrq(8, v -> { }), "vector 8", "8 MSI-X vectors");
        refused(() -> f.raiseMsix(-1), "vector -1", "8 MSI-X vectors");
        refused(() -> f.freeIrq(9), "vector 9", "8 MSI-X vectors");
        refused(() -> f.msixRaised(100), "vector 100");
        PciFunction none = core.register(PciDeviceSpec.builder("no msi-x").vendorId(1).deviceId(2).bar(0, 4096).build());
        refused(() -> none.requestIrq(0, v -> { }), "vector 0", "0 MSI-X vectors");

        f.requestIrq(0, v -> { });
        IllegalStateException twice = assertThrows(IllegalStateException.class, () -> f.requestIrq(0, v -> { }));
        assertTrue(twice.getMessage().contains("vector 0") && twice.getMessage().contains("irq/0-0000:03:00.0"), twice.getMessage());
        f.freeIrq(0);
        f.freeIrq(0); // freeing a free vector is harmless
        f.requestIrq(0, v -> { });
        assertTrue(f.irqRequested(0), "a freed vector can be requested again");
    }

    // ---------------------------------------------------------------- surprise removal

    @Test
    void afterSurpriseRemovalReadsReturnAllOnesWritesAreDroppedAndListenersRun() throws Exception {
        List<String> writes = Collections.synchronizedList(new ArrayList<>());
        PciFunction f = register((bar, offset, width, value) -> writes.add("write"));
        f.write32(0, 0, 0x1234);
        BlockingQueue<Integer> irqs = new LinkedBlockingQueue<>();
        f.requestIrq(0, irqs::add);
        f.requestIrq(7, irqs::add);
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        f.addRemovalListener(() -> order.add("listener present=" + f.present() + " published=" + events.contains("removed " + f.bdf())));
        Runnable forgotten = () -> order.add("forgotten listener ran");
        f.addRemovalListener(forgotten);
        f.removeRemovalListener(forgotten);
        MemorySegment bar0 = f.barMemory(0);
        assertEquals(List.of("irq/0-0000:03:00.0", "irq/7-0000:03:00.0"), irqThreads("-" + f.bdf()));

        f.remove();

        assertFalse(f.present());
        assertEquals(List.of("listener present=false published=false"), order, "listeners run before the service goes");
        assertTrue(events.contains("removed 0000:03:00.0"));
        assertEquals(List.of(), core.functions());
        assertEquals(List.of(), irqThreads("-" + f.bdf()), "remove() ends the IRQ threads");
        assertFalse(bar0.scope().isAlive(), "BAR memory is freed when no access is in flight");

        assertEquals(0xffffffff, f.read32(0, 0));
        assertEquals(-1L, f.read64(0, 8));
        assertEquals(0xffffffff, f.read32be(2, 0));
        f.write32(0, 0, 1);
        f.write64(0, 8, 1);
        f.write32be(0, 16, 1);
        assertEquals(List.of("write"), writes, "writes after removal go nowhere");
        f.raiseMsix(0);
        assertEquals(0, f.msixRaised(0), "a removed device cannot interrupt");
        f.requestIrq(3, v -> { });
        assertFalse(f.irqRequested(3), "requesting an IRQ of a removed device does nothing");
        assertEquals(List.of(), irqThreads("-" + f.bdf()));
        f.freeIrq(0); // a driver's teardown after the device vanished
        assertTrue(irqs.isEmpty());
        assertTrue(warnings.isEmpty(), warnings::toString);
    }

    @Test
    void removeIsIdempotentAndALateListenerRunsAtOnce() {
        PciFunction f = register(null);
        AtomicInteger runs = new AtomicInteger();
        f.addRemovalListener(() -> {
            runs.incrementAndGet();
            f.remove(); // re-entrant: returns at once
        });
        f.remove();
        f.remove();
        assertEquals(1, runs.get());
        assertEquals(1, events.stream().filter(e -> e.startsWith("removed")).count(), "unpublished once");
        f.addRemovalListener(runs::incrementAndGet);
        assertEquals(2, runs.get(), "added after removal: run immediately");
    }

    @Test
    void aDeviceModelMayPullItsCardFromItsOwnDoorbellHandler() {
        AtomicReference<PciFunction> self = new AtomicReference<>();
        PciFunction f = register((bar, offset, width, value) -> {
            if (value == 0xdead) {
                self.get().remove();
                // still inside the driver's write: the BAR memory must still be there
                assertEquals(0xdead, self.get().barMemory(0).get(ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN), offset));
            }
        });
        self.set(f);
        MemorySegment bar0 = f.barMemory(0);
        f.write32(0, 0x40, 0xdead);
        assertFalse(f.present());
        assertFalse(bar0.scope().isAlive(), "freed by the write that was in flight, when it ended");
        assertEquals(0xffffffff, f.read32(0, 0x40));
        assertTrue(warnings.isEmpty(), warnings::toString);
    }

    @Test
    void mmioRacingSurpriseRemovalNeverFailsAndEndsInBoundedTime() throws Exception {
        for (int round = 0; round < 5; round++) {
            stressRound();
        }
        assertTrue(warnings.isEmpty(), warnings::toString);
    }

    private void stressRound() throws Exception {
        AtomicReference<PciFunction> self = new AtomicReference<>();
        // the doorbell handler reads BAR memory: it must never see it freed under it
        PciFunction f = core.register(cx4().bar(0, 1 << 16).bar(2, 4096, (bar, offset, width, value) ->
                self.get().barMemory(2).get(ValueLayout.JAVA_INT, offset)).msixVectors(4).build());
        self.set(f);
        AtomicInteger handled = new AtomicInteger();
        for (int v = 0; v < 4; v++) {
            f.requestIrq(v, vec -> {
                f.read32(0, 0); // handlers do MMIO too
                handled.incrementAndGet();
            });
        }
        MemorySegment bar0 = f.barMemory(0);
        int workers = 4;
        ExecutorService pool = Executors.newFixedThreadPool(workers);
        CountDownLatch warm = new CountDownLatch(workers);
        List<Future<String>> results = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            int id = w + 1;
            results.add(pool.submit(() -> {
                long ops = 0;
                int afterGone = 0;
                while (afterGone < 2_000) {
                    boolean gone = !f.present();
                    long off = (ops % 1024) * 8;
                    f.write32(0, off, id);
                    int a = f.read32(0, off);
                    f.write64(0, off, ((long) id << 32) | (ops & 0xffff));
                    long b = f.read64(0, off);
                    f.write32be(2, (ops % 512) * 4, id);
                    int c = f.read32be(2, (ops % 512) * 4);
                    f.raiseMsix((int) (ops & 3));
                    if (gone && (a != -1 || b != -1L || c != -1)) {
                        return "worker " + id + " read a value after removal: " + a + " " + b + " " + c;
                    }
                    if ((a == -1 || b == -1L || c == -1) && f.present()) {
                        return "worker " + id + " read all ones from a present device";
                    }
                    if (gone) {
                        afterGone++;
                    }
                    if (++ops == 2_000) {
                        warm.countDown();
                    }
                }
                return null;
            }));
        }
        assertTrue(warm.await(30, TimeUnit.SECONDS), "the workers got going");
        f.remove();
        pool.shutdown();
        assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS), "every MMIO loop finished");
        for (Future<String> r : results) {
            assertNull(r.get(), "no exception, no wrong value"); // get() rethrows whatever a worker threw
        }
        assertEquals(List.of(), irqThreads("-" + f.bdf()), "no IRQ thread survives remove()");
        assertFalse(bar0.scope().isAlive(), "the BAR memory was freed once the last access ended");
        assertTrue(handled.get() > 0, "interrupts were handled during the run");
    }

    @Test
    void closeRemovesEveryFunctionEndsEveryThreadAndRefusesNewOnes() {
        PciFunction a = register(null);
        PciFunction b = register(null);
        a.requestIrq(0, v -> { });
        b.requestIrq(1, v -> { });
        core.close();
        core.close();
        assertFalse(a.present());
        assertFalse(b.present());
        assertEquals(List.of("added 0000:03:00.0", "added 0000:04:00.0", "removed 0000:04:00.0", "removed 0000:03:00.0"), events,
                "the newest function goes first");
        assertEquals(List.of(), irqThreads(""));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> register(null));
        assertTrue(e.getMessage().contains("shut down"), e.getMessage());
    }

    // ---------------------------------------------------------------- helpers

    private static void await(CountDownLatch latch) {
        try {
            if (!latch.await(WAIT_S, TimeUnit.SECONDS)) {
                throw new AssertionError("latch not released within " + WAIT_S + " s");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Polls (never sleeps) until {@code t} is in {@code state}, for at most 5 s. */
    private static void awaitState(Thread t, Thread.State state) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (t.getState() != state) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " is " + t.getState() + ", not " + state);
            }
            Thread.onSpinWait();
        }
    }

    /**
     * Each function behind an IOMMU gets its own domain at plug-in, named by its bus address: the
     * driver maps through {@code fn.dma()}, the device reads and writes through {@code fn.dmaPort()}
     * and nothing else. Removal detaches the domain after the driver's unbind; pages the driver left
     * mapped are reported, and the device's port faults afterwards. A bus without IOMMU refuses DMA.
     */
    @Test
    void eachFunctionGetsItsOwnIommuDomainFromPlugInToRemoval(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) {
        org.peerdirect.kernel.mm.Mm mm = new org.peerdirect.kernel.mm.Mm(8 << 20, true, tmp.resolve("swap"), 1 << 20);
        try {
            org.peerdirect.kernel.iommu.Iommu iommu = new org.peerdirect.kernel.iommu.Iommu(mm);
            PciBusCore bus = new PciBusCore(new PciBusCore.Listener() {
                @Override
                public void added(PciFunction f) {
                }

                @Override
                public void removed(PciFunction f) {
                }
            }, warnings::add, iommu);
            PciFunction a = bus.register(cx4().bar(0, 4096).msixVectors(1).build());
            PciFunction b = bus.register(cx4().bar(0, 4096).msixVectors(1).build());
            assertEquals(a.bdf(), ((org.peerdirect.kernel.iommu.IommuDomain) a.dma()).name(), "the domain is named by the bus address");
            assertTrue(a.dma() == a.dmaPort(), "one domain, two faces");
            assertTrue(a.dma() != b.dma(), "a domain per function");

            long page = mm.allocPages(0);
            mm.pageAddress(page, 0).set(ValueLayout.JAVA_LONG, 0, 0x1234);
            long iova = a.dma().dmaMapPage(page, org.peerdirect.kernel.dma.DmaDirection.BIDIRECTIONAL);
            MemorySegment buf = java.lang.foreign.Arena.ofAuto().allocate(8);
            a.dmaPort().read(iova, buf, 0, 8);
            assertEquals(0x1234, buf.get(ValueLayout.JAVA_LONG, 0), "the device reads what its driver mapped");
            assertThrows(org.peerdirect.kernel.iommu.IommuFault.class, () -> b.dmaPort().read(iova, buf, 0, 8),
                    "another function's mapping is not this function's");

            org.peerdirect.kernel.dma.DmaPort portOfA = a.dmaPort();
            a.remove(); // its "driver" left the page mapped
            assertTrue(warnings.stream().anyMatch(w -> w.contains(a.bdf()) && w.contains("1 page(s) DMA-mapped at removal")), warnings.toString());
            assertThrows(org.peerdirect.kernel.iommu.IommuFault.class, () -> portOfA.read(iova, buf, 0, 8),
                    "no DMA through a removed function's domain");
            assertEquals(2, iommu.audit().faults(), "both refused accesses were counted");
            bus.close();
            warnings.clear();
            mm.freePages(page, 0);

            PciFunction noIommu = register(null);
            org.peerdirect.kernel.mm.KernelException e = assertThrows(org.peerdirect.kernel.mm.KernelException.class, noIommu::dma);
            assertTrue(e.getMessage().contains("no IOMMU"), e.getMessage());
            assertThrows(org.peerdirect.kernel.mm.KernelException.class, noIommu::dmaPort);
        } finally {
            mm.close();
        }
    }
}
