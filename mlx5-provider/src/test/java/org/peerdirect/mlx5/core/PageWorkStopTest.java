package org.peerdirect.mlx5.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * The page work at teardown ({@code mlx5_pagealloc_stop}): a page command the work thread has in
 * flight when the teardown stops the work is waited for, not interrupted.
 *
 * <p>The race (CI: {@code Mlx5VerbsTest.postingBeforeRtsIsRefusedWithItsReason}, "the firmware
 * holds pages" at teardown under load): the objects' destruction made the firmware ask for pages
 * back, the work thread's MANAGE_PAGES was on its way when the unload stopped the work by
 * interrupting it. The interrupted waiter gave the command up (a timeout: its pages stay as
 * given, the reserved slot is lost, as for any command the firmware may still own), so the
 * reclaim that follows found no slot for its MANAGE_PAGES, gave up after the command timeout and
 * took the pages back locally while the firmware still held them. Here a slow firmware
 * ({@link ConnectX4Device#holdCommands}) keeps the page request's GIVE in flight while the work
 * is stopped.
 */
class PageWorkStopTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;
    ConnectX4Device model;
    PciFunction fn;
    Mlx5CoreDev dev;

    @BeforeEach
    void up() {
        mm = new Mm(32L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        model = new ConnectX4Device("ConnectX", ConnectX4Device.DEVICE_CONNECTX4, new org.peerdirect.hca.boards.Fabric());
        fn = bus.register(model.spec());
        // a 2 s command timeout: a lost reserved slot costs the reclaim that long before it gives up
        dev = new Mlx5CoreDev("mlx5_0", fn, mm, new Mlx5CoreDev.Settings(2_000, 2_000, 2_000));
    }

    @AfterEach
    void down() {
        model.releaseCommands();
        dev.unload();
        assertEquals(0, dev.dmaPagesLive(), "every DMA page of the driver unmapped and freed");
        bus.close();
        model.close();
        assertTrue(iommu.audit().clean(), "no violation, no mapping left: " + iommu.audit());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
        assertEquals(List.of(), bus.warnings(), "no BAR write handler threw");
    }

    @Test
    void aPageCommandInFlightWhenTheWorkStopsIsWaitedForAndTheFirmwareGivesEveryPageBack() throws Exception {
        dev.load();
        Mlx5CoreTest.await("pages settled", () -> dev.pagesGiven(PageAlloc.Kind.REGULAR) > 0 && dev.pagesHeld() == model.pagesHeld()
                && dev.commandsInFlight() == 0);
        model.holdCommands();
        dev.pages().request(1); // mlx5_core_req_pages_handler: the work thread gives one page
        Mlx5CoreTest.await("the page work's GIVE is on its way", () -> dev.commandsInFlight() == 1);
        Thread stopper = Thread.ofPlatform().name("pagealloc-stop").start(() -> dev.pages().stop(TimeUnit.SECONDS.toNanos(10)));
        Mlx5CoreTest.await("the stop waits for the page work (or is done)",
                () -> stopper.getState() == Thread.State.TIMED_WAITING || stopper.getState() == Thread.State.WAITING || !stopper.isAlive());
        model.releaseCommands(); // the firmware takes the GIVE now
        stopper.join(TimeUnit.SECONDS.toMillis(15));
        assertFalse(stopper.isAlive(), "the stop ended");
        assertEquals(model.pagesHeld(), dev.pagesHeld(), "driver and firmware agree on the pages held after the GIVE: " + dev.pagesSummary());
        dev.unload();
        assertEquals(0, model.pagesHeld(), "the firmware gave every page back at teardown: " + dev.pagesSummary() + " / " + model.describe());
        assertTrue(dev.pagesSummary().contains("reclaimed locally 0"), dev.pagesSummary());
    }
}
