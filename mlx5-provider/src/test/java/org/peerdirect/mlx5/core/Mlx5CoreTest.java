package org.peerdirect.mlx5.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * mlx5_core against the ConnectX-4+ model, with nothing between them but the function: MMIO, DMA
 * through the IOMMU, MSI-X. Every test ends with the firmware holding no page, no DMA page of the
 * driver left, the IOMMU audit clean and every frame free.
 */
class Mlx5CoreTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;
    ConnectX4Device model;
    PciFunction fn;
    Mlx5CoreDev dev;

    void up(int deviceId, Mlx5CoreDev.Settings settings) {
        mm = new Mm(32L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        model = new ConnectX4Device("ConnectX", deviceId, new org.peerdirect.hca.boards.Fabric());
        fn = bus.register(model.spec());
        dev = new Mlx5CoreDev("mlx5_0", fn, mm, settings);
    }

    /** Another machine for a test that needs another device or other settings (the default one had nothing to leave behind). */
    void restart(int deviceId, Mlx5CoreDev.Settings settings) {
        dev.unload();
        bus.close();
        model.close();
        mm.close();
        up(deviceId, settings);
    }

    @BeforeEach
    void defaults() {
        up(ConnectX4Device.DEVICE_CONNECTX4, new Mlx5CoreDev.Settings(10_000, 50, 2_000));
    }

    @AfterEach
    void down() {
        dev.unload();
        assertEquals(0, dev.dmaPagesLive(), "every DMA page of the driver unmapped and freed");
        bus.close();
        model.close();
        assertTrue(iommu.audit().clean(), "no violation, no mapping left: " + iommu.audit());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
        assertEquals(List.of(), bus.warnings(), "no BAR write handler threw");
    }

    static void await(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!cond.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what + " within 10 s");
            java.util.concurrent.locks.LockSupport.parkNanos(100_000); // a poll of observable state; leaves the 2 cores to the firmware and the driver
        }
    }

    static List<String> ops(List<CmdLog.Entry> es) {
        List<String> out = new ArrayList<>();
        for (CmdLog.Entry e : es) {
            out.add(Mlx5Cmd.name(e.opcode()) + (e.opMod() != 0 ? "/" + e.opMod() : ""));
        }
        return out;
    }

    @Test
    void bringUpInTheLinuxOrderThenEventsThenTeardownTakesEveryPageBack() {
        dev.load();
        assertTrue(dev.isUp());
        List<CmdLog.Entry> log = dev.cmdLog().entries();
        assertEquals(List.of("ENABLE_HCA", "QUERY_ISSI", "SET_ISSI", "QUERY_PAGES/1", "MANAGE_PAGES/1", "QUERY_HCA_CAP", "QUERY_HCA_CAP/1",
                "SET_HCA_CAP", "QUERY_HCA_CAP/4", "QUERY_HCA_CAP/5", "SET_HCA_CAP/4", "QUERY_PAGES/2", "MANAGE_PAGES/1", "INIT_HCA", "SET_DRIVER_VERSION", "QUERY_HCA_CAP", "QUERY_HCA_CAP/1", "ALLOC_UAR",
                "CREATE_EQ", "CREATE_EQ", "CREATE_EQ"), ops(log.subList(0, 21)),
                "mlx5_function_setup's order, ENABLE_HCA first, the ODP caps' SRQ receives enabled (handle_hca_cap_odp); the command, async and pages EQs");
        // the completion EQ follows; the first page request may be answered before it (the pages EQ exists)
        assertEquals(List.of("CREATE_EQ"), ops(log.subList(21, log.size())).stream().filter(o -> !o.equals("MANAGE_PAGES/1")).toList(),
                "then the completion EQ");
        for (int i = 0; i < 19; i++) {
            assertFalse(log.get(i).events(), "polled before the command EQ exists: " + log.get(i));
        }
        assertTrue(log.subList(19, log.size()).stream().allMatch(CmdLog.Entry::events), "from the async EQ on, commands complete by events");
        log.forEach(e -> assertEquals(0, e.status(), "every bring-up command succeeded: " + e));
        assertEquals(1, dev.issi(), "SET_ISSI(1): the model supports ISSI 1");
        assertEquals(HcaCap.PORT_TYPE_IB, dev.cap(HcaCap.PORT_TYPE), "a ConnectX-4 port is InfiniBand");
        assertEquals(18, dev.cap(HcaCap.LOG_MAX_QP));
        assertTrue(model.describe().contains("state INITIALIZED"), model.describe());
        // the firmware asks for regular pages as soon as it can (the pages EQ exists): the driver's page work answers
        await("the firmware's first page request answered", () -> dev.pagesGiven(PageAlloc.Kind.REGULAR) > 0);
        await("driver and firmware agree on the pages held", () -> dev.pagesHeld() == model.pagesHeld());
        assertEquals(4, dev.pagesGiven(PageAlloc.Kind.BOOT), "boot pages");
        assertEquals(2, dev.pagesGiven(PageAlloc.Kind.INIT), "init pages");
        assertTrue(dev.pageRequests() >= 1);
        assertTrue(dev.eqsSummary().stream().anyMatch(l -> l.contains("pages") && !l.contains("page requests 0")), dev.eqsSummary().toString());
        assertEquals(0, model.deliveryErrors());

        long before = dev.cmdLog().total();
        dev.unload();
        List<CmdLog.Entry> all = dev.cmdLog().entries();
        List<String> down = ops(all.subList((int) (before - all.get(0).seq()), all.size()));
        assertEquals(List.of("DESTROY_EQ", "DESTROY_EQ", "DESTROY_EQ", "DESTROY_EQ", "DEALLOC_UAR", "TEARDOWN_HCA"), down.subList(0, 6));
        assertEquals("DISABLE_HCA", down.get(down.size() - 1), "DISABLE_HCA is the last command");
        assertTrue(down.subList(6, down.size() - 1).stream().allMatch("MANAGE_PAGES/2"::equals), "pages taken back in between: " + down);
        assertFalse(all.get(all.size() - 3).events(), "the command EQ is destroyed polled");
        all.forEach(e -> assertEquals(0, e.status(), "every command succeeded: " + e));
        assertEquals(0, model.pagesHeld(), "the firmware holds no page");
        assertEquals(0, dev.pagesHeld());
        assertTrue(model.describe().contains("state DISABLED"), model.describe());
        assertEquals(List.of(), dev.teardownProblems());
        assertEquals(0, fn.dma().mappedPages(), "no mapping left in the function's domain");
    }

    /**
     * Back-to-back probe and remove on one function, as a fast rebind does: every cycle ends with
     * every page taken back by MANAGE_PAGES (none left with the firmware) and DISABLE_HCA accepted.
     */
    @Test
    void loadAndUnloadBackToBackTakeEveryPageBackEachTime() {
        for (int i = 0; i < 50; i++) {
            Mlx5CoreDev d = new Mlx5CoreDev("mlx5_" + (i + 1), fn, mm, new Mlx5CoreDev.Settings(10_000, 2_000, 2_000));
            d.load();
            d.unload();
            assertEquals(0, model.pagesHeld(), "cycle " + i + ": the firmware holds no page: " + d.pagesSummary() + " / " + model.describe());
            assertTrue(d.pagesSummary().contains("reclaimed locally 0"), "cycle " + i + ": every page came back by command: " + d.pagesSummary());
        }
    }

    @Test
    void theFirmwareAsksForPagesAsContextsGrowAndGivesThemBackWhenTheyShrink() {
        dev.load();
        await("first page request answered", () -> dev.pagesGiven(PageAlloc.Kind.REGULAR) > 0 && dev.pagesHeld() == model.pagesHeld());
        int base = dev.pagesHeld();
        List<Mlx5Eq> extra = new ArrayList<>();
        for (int i = 0; i < 24; i++) { // 1 KiB of context each: 6 more pages, some commands parked until the pages come
            extra.add(dev.createEq("test", 1, 0));
        }
        await("the firmware grew its pages", () -> model.pagesHeld() >= base + 6 && dev.pagesHeld() == model.pagesHeld());
        int grown = dev.pagesHeld();
        for (Mlx5Eq eq : extra) {
            dev.destroyEq(eq);
        }
        await("idle pages handed back on the firmware's request", () -> dev.pagesHeld() < grown && dev.pagesHeld() == model.pagesHeld());
        assertTrue(dev.pageRequests() >= 3, "requests both ways: " + dev.pagesSummary());
        dev.cmdLog().entries().forEach(e -> assertEquals(0, e.status(), "nothing refused: " + e));
    }

    @Test
    void connectX6DxIsEthernetWithRoce() {
        restart(ConnectX4Device.DEVICE_CONNECTX6DX, new Mlx5CoreDev.Settings(10_000, 50, 2_000));
        dev.load();
        assertEquals(HcaCap.PORT_TYPE_ETH, dev.cap(HcaCap.PORT_TYPE));
        assertEquals(1, dev.cap(HcaCap.ROCE));
    }

    @Test
    void aFatalFirmwareErrorMarksTheDeviceDeadAndTeardownReclaimsLocally() {
        dev.load();
        await("pages settled", () -> dev.pagesGiven(PageAlloc.Kind.REGULAR) > 0 && dev.pagesHeld() == model.pagesHeld());
        model.fatal(ConnectX4Device.HEALTH_SYNDR_FW_ERR);
        await("the health poll noticed", () -> dev.deadReason() != null);
        assertTrue(dev.deadReason().contains("health syndrome 0x1"), dev.deadReason());
        Mlx5CmdException e = assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.NOP, 0, 0));
        assertEquals(Mlx5CmdException.Kind.DEVICE_GONE, e.kind(), e.getMessage());
        assertEquals(-6, e.errno(), "-ENXIO");
        dev.unload();
        assertEquals(0, dev.pagesHeld(), "reclaimed without firmware: " + dev.pagesSummary());
        assertTrue(dev.pagesSummary().contains("reclaimed locally " + model.pagesHeld()), dev.pagesSummary());
    }

    @Test
    void aHungFirmwareIsFoundByItsStuckHealthCounterAndAWaitingCommandEndsInAnError() throws Exception {
        dev.load();
        await("pages settled", () -> dev.pagesGiven(PageAlloc.Kind.REGULAR) > 0 && dev.pagesHeld() == model.pagesHeld());
        model.hang();
        Mlx5CmdException e = assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.NOP, 0, 0));
        assertEquals(Mlx5CmdException.Kind.DEVICE_GONE, e.kind(), "the waiting command ends when the health poll declares the device dead: "
                + e.getMessage());
        assertNotNull(dev.deadReason());
        assertTrue(dev.deadReason().contains("miss count"), dev.deadReason());
        assertTrue(dev.healthSummary().contains("DEAD"), dev.healthSummary());
    }

    @Test
    void aCommandTimesOutWhenTheFirmwareDoesNotAnswerAndTheHealthPollIsSlow() {
        restart(ConnectX4Device.DEVICE_CONNECTX4, new Mlx5CoreDev.Settings(300, 60_000, 2_000));
        dev.load();
        model.hang();
        Mlx5CmdException e = assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.NOP, 0, 0));
        assertEquals(Mlx5CmdException.Kind.TIMEOUT, e.kind(), e.getMessage());
        assertEquals(-110, e.errno());
        assertTrue(e.getMessage().startsWith("NOP(0x80d)"), e.getMessage());
        assertNull(dev.deadReason());
        // the teardown gives up on the hung firmware's commands one timeout each and still frees everything
    }

    /**
     * Timing changed in place (Configuration Admin's {@code @Modified} on the driver): a device
     * brought up with a one-minute command timeout and health poll gets 300 ms and 20 ms while up.
     * A hung firmware is then declared dead by the new poll (a stuck counter for three polls), the
     * waiting command ends at once; with the old timing both would take a minute.
     */
    @Test
    void newTimingAppliesInPlaceToARunningDevice() {
        restart(ConnectX4Device.DEVICE_CONNECTX4, new Mlx5CoreDev.Settings(60_000, 60_000, 2_000));
        dev.load();
        dev.settings(new Mlx5CoreDev.Settings(60_000, 20, 2_000));
        assertTrue(dev.healthSummary().contains("poll every 20 ms"), dev.healthSummary());
        model.hang();
        Mlx5CmdException e = assertTimeoutPreemptively(java.time.Duration.ofSeconds(20),
                () -> assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.NOP, 0, 0)),
                "the new health poll must find the hang long before the old one-minute poll");
        assertEquals(Mlx5CmdException.Kind.DEVICE_GONE, e.kind(), e.getMessage());
        assertTrue(dev.deadReason().contains("miss count"), dev.deadReason());
    }

    /** The command timeout changed in place: a command to a hung firmware times out after the new 300 ms, not the old minute. */
    @Test
    void aNewCommandTimeoutAppliesToTheNextCommand() {
        restart(ConnectX4Device.DEVICE_CONNECTX4, new Mlx5CoreDev.Settings(60_000, 60_000, 2_000));
        dev.load();
        dev.settings(new Mlx5CoreDev.Settings(300, 60_000, 2_000));
        model.hang();
        Mlx5CmdException e = assertTimeoutPreemptively(java.time.Duration.ofSeconds(20),
                () -> assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.NOP, 0, 0)));
        assertEquals(Mlx5CmdException.Kind.TIMEOUT, e.kind(), e.getMessage());
        assertTrue(e.getMessage().contains("300 ms"), e.getMessage());
    }

    @Test
    void aSurpriseRemovalEndsAWaitingCommandAndTheTeardownSendsNothing() throws Exception {
        dev.load();
        fn.addRemovalListener(dev::unload); // as the driver's remove_one: runs on the removing thread, before the domain goes
        model.hang();
        Thread main = Thread.currentThread();
        Thread remover = Thread.ofPlatform().start(() -> {
            await("the NOP is waiting for its completion event", () -> main.getState() == Thread.State.TIMED_WAITING);
            fn.remove();
        });
        Mlx5CmdException e = assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.NOP, 0, 0));
        remover.join(10_000);
        assertEquals(Mlx5CmdException.Kind.DEVICE_GONE, e.kind(), e.getMessage());
        long sent = dev.cmdLog().total();
        dev.unload();
        assertEquals(sent, dev.cmdLog().total(), "no command sent to a function that is gone");
        assertEquals(0, dev.pagesHeld());
    }

    @Test
    void theFirmwareRefusesABadCommandWithItsStatusAndTheDriverGoesOn() {
        dev.load();
        Mlx5CmdException e = assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(Mlx5Cmd.DEALLOC_UAR, 0, 12345));
        assertEquals(Mlx5CmdException.Kind.STATUS, e.kind());
        assertEquals(Mlx5Cmd.STAT_BAD_RES_ERR, e.status());
        assertEquals(-22, e.errno());
        assertTrue(e.getMessage().contains("DEALLOC_UAR(0x803) op_mod(0x0) failed, status bad resource(0x5)"), e.getMessage());
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, assertThrows(Mlx5CmdException.class,
                () -> dev.execIndexed(Mlx5Cmd.QUERY_PAGES, 7, 0)).status(), "QUERY_PAGES has no op_mod 7");
        assertEquals(Mlx5Cmd.STAT_BAD_OP_ERR, assertThrows(Mlx5CmdException.class, () -> dev.execIndexed(0x7777, 0, 0)).status());
        assertEquals(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, assertThrows(Mlx5CmdException.class,
                () -> dev.execIndexed(Mlx5Cmd.SET_ISSI, 0, 0)).status(), "SET_ISSI after INIT_HCA");
        dev.execIndexed(Mlx5Cmd.NOP, 0, 0);
    }

    /** mlx5_cmd_use_polling / _use_events: a loaded driver may go back to polling and return to events; no events without the command EQ. */
    @Test
    void commandsCompleteByPollingOrByEventsOnDemand() {
        IllegalStateException before = assertThrows(IllegalStateException.class, dev::cmdUseEvents);
        assertTrue(before.getMessage().contains("no command EQ"), before.getMessage());
        dev.load();
        assertTrue(dev.eventMode(), "events once the command EQ exists");
        dev.cmdUsePolling();
        assertFalse(dev.eventMode());
        for (int i = 0; i < 50; i++) {
            dev.execIndexed(Mlx5Cmd.NOP, 0, 0);
        }
        dev.cmdUseEvents();
        assertTrue(dev.eventMode());
        dev.execIndexed(Mlx5Cmd.NOP, 0, 0);
        dev.unload();
        assertThrows(IllegalStateException.class, dev::cmdUseEvents, "the command EQ went with the unload");
        assertFalse(dev.eventMode(), "teardown ends in polling");
    }
}
