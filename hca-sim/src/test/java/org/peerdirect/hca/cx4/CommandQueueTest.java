package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.CmdMailbox;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * The ConnectX-4+ command interface from the driver's side only: MMIO on the function's BAR0 and
 * DMA memory the test allocated and mapped through the function's IOMMU domain, as
 * {@code mlx5_cmd_init} and {@code cmd_work_handler} use them. Every test ends with every page
 * unmapped and freed and the IOMMU audit clean.
 */
class CommandQueueTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;
    ConnectX4Device dev;
    PciFunction fn;
    final List<Long> pfns = new ArrayList<>();
    final List<Long> iovas = new ArrayList<>();
    MemorySegment queue;
    long queueIova;
    byte token = 1;
    /** IOMMU faults a test provokes on purpose. */
    long expectedFaults;

    /** One kernel page mapped for the device: [pfn index, segment, iova]. */
    record Page(MemorySegment mem, long iova) {
    }

    Page page() {
        long pfn = mm.allocPages(0);
        pfns.add(pfn);
        long iova = fn.dma().dmaMapPage(pfn, DmaDirection.BIDIRECTIONAL);
        iovas.add(iova);
        return new Page(mm.pageAddress(pfn, 0), iova);
    }

    @BeforeEach
    void up() {
        mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        dev = new ConnectX4Device("mlx5-test", ConnectX4Device.DEVICE_CONNECTX4, new org.peerdirect.hca.boards.Fabric());
        fn = bus.register(dev.spec()); // powers the device on
    }

    @AfterEach
    void down() {
        dev.close();
        for (long iova : iovas) {
            fn.dma().dmaUnmap(iova, 1);
        }
        for (long pfn : pfns) {
            mm.freePages(pfn, 0);
        }
        bus.close();
        assertEquals(expectedFaults, iommu.audit().faults(), "no IOMMU fault but those provoked");
        assertTrue(iommu.audit().clean(), "no violation, no mapping left: " + iommu.audit());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
        assertEquals(List.of(), bus.warnings(), "no BAR write handler threw");
    }

    /** {@code mlx5_cmd_init}: wait for the firmware, check the interface revision, hand over the queue page. */
    void cmdInit() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while ((fn.read32be(0, InitSeg.INITIALIZING) & InitSeg.INITIALIZING_BIT) != 0) {
            assertTrue(System.nanoTime() < deadline, "firmware ready within 10 s");
            Thread.onSpinWait();
        }
        assertEquals(InitSeg.CMD_IF_REV, fn.read32be(0, InitSeg.CMDIF_REV_FW_SUB) >>> 16);
        int sz = fn.read32be(0, InitSeg.CMDQ_ADDR_L_SZ);
        assertEquals(5, sz >> 4 & 0xf, "log_cmdq_size");
        assertEquals(6, sz & 0xf, "log_cmdq_stride");
        Page q = page();
        queue = q.mem();
        queueIova = q.iova();
        fn.write32be(0, InitSeg.CMDQ_ADDR_H, (int) (queueIova >>> 32));
        fn.write32be(0, InitSeg.CMDQ_ADDR_L_SZ, (int) queueIova);
        assertEquals((int) queueIova & 0xffff_f000 | 0x56, fn.read32be(0, InitSeg.CMDQ_ADDR_L_SZ),
                "the address reads back with the queue's geometry");
    }

    /** A command as {@code cmd_work_handler} issues it; the entry's offset in the queue page. */
    class Cmd {
        final int slot;
        final MemorySegment in;
        final int outlen;
        long inPtr;
        long outPtr;
        final List<Page> inBoxes = new ArrayList<>();
        final List<Page> outBoxes = new ArrayList<>();
        MemorySegment out;
        int delivery = -1;

        Cmd(int slot, int opcode, int opMod, int inlen, int outlen) {
            this.slot = slot;
            this.in = MemorySegment.ofArray(new byte[inlen]);
            this.outlen = outlen;
            in.set(BE32, 0, opcode << 16);
            in.set(BE32, 4, opMod & 0xffff);
            inPtr = chain(inBoxes, inlen);
            outPtr = chain(outBoxes, outlen);
        }

        long chain(List<Page> boxes, int len) {
            int n = CmdMailbox.blocks(len);
            for (int i = 0; i < n; i++) {
                boxes.add(page());
            }
            for (int i = 0; i < n; i++) {
                MemorySegment b = boxes.get(i).mem();
                b.set(BE64, CmdMailbox.NEXT, i + 1 < n ? boxes.get(i + 1).iova() : 0);
                b.set(BE32, CmdMailbox.BLOCK_NUM, i);
                b.set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, token);
            }
            return n == 0 ? 0 : boxes.get(0).iova();
        }

        MemorySegment entry() {
            return queue.asSlice((long) slot * CmdEntry.SIZE, CmdEntry.SIZE);
        }

        /** Writes the entry and the input mailboxes, rings, polls for ownership, reads the output. */
        Cmd run() {
            return start().finish();
        }

        /** Hardware owns the entry now. */
        boolean owned() {
            return (entry().get(ValueLayout.JAVA_BYTE, CmdEntry.STATUS_OWN) & CmdEntry.OWNER_HW) != 0;
        }

        /** Writes the entry and the input mailboxes and rings the doorbell. */
        Cmd start() {
            for (int i = 0; i < inBoxes.size(); i++) {
                int off = CmdEntry.INLINE + i * CmdMailbox.DATA_SIZE;
                MemorySegment.copy(in, off, inBoxes.get(i).mem(), 0, Math.min(CmdMailbox.DATA_SIZE, in.byteSize() - off));
            }
            MemorySegment e = entry();
            e.fill((byte) 0);
            MemorySegment.copy(in, 0, e, CmdEntry.IN, Math.min(16, in.byteSize()));
            e.set(ValueLayout.JAVA_BYTE, CmdEntry.TYPE, (byte) CmdEntry.PCI_CMD_XPORT);
            e.set(BE32, CmdEntry.INPUT_LENGTH, (int) in.byteSize());
            e.set(BE64, CmdEntry.IN_PTR, inPtr);
            e.set(BE64, CmdEntry.OUT_PTR, outPtr);
            e.set(BE32, CmdEntry.OUTPUT_LENGTH, outlen);
            e.set(ValueLayout.JAVA_BYTE, CmdEntry.TOKEN, token);
            tamper(e);
            e.set(ValueLayout.JAVA_BYTE, CmdEntry.STATUS_OWN, (byte) CmdEntry.OWNER_HW);
            fn.write32be(0, InitSeg.CMD_DBELL, 1 << slot);
            return this;
        }

        /** Polls for ownership and reads the output. */
        Cmd finish() {
            MemorySegment e = entry();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while ((e.get(ValueLayout.JAVA_BYTE, CmdEntry.STATUS_OWN) & CmdEntry.OWNER_HW) != 0) {
                assertTrue(System.nanoTime() < deadline, "the firmware hands the entry back within 10 s");
                Thread.onSpinWait();
            }
            delivery = (e.get(ValueLayout.JAVA_BYTE, CmdEntry.STATUS_OWN) & 0xff) >>> 1;
            out = MemorySegment.ofArray(new byte[outlen]);
            MemorySegment.copy(e, CmdEntry.OUT, out, 0, Math.min(16, outlen));
            for (int i = 0; i < outBoxes.size(); i++) {
                int off = CmdEntry.INLINE + i * CmdMailbox.DATA_SIZE;
                MemorySegment.copy(outBoxes.get(i).mem(), 0, out, off, Math.min(CmdMailbox.DATA_SIZE, outlen - off));
            }
            return this;
        }

        /** A test's change to the finished entry before it is handed over. */
        void tamper(MemorySegment e) {
        }

        int status() {
            assertEquals(CmdEntry.DELIVERY_OK, delivery, "delivered: " + CmdEntry.deliveryName(delivery));
            return out.get(ValueLayout.JAVA_BYTE, 0) & 0xff;
        }

        int syndrome() {
            return out.get(BE32, 4);
        }
    }

    int simple(int opcode) {
        return new Cmd(0, opcode, 0, 16, 16).run().status();
    }

    /**
     * The bus removing the function (sim-kernel stopping, a hot-unplug not made by the model) frees
     * its BAR memory: the firmware must be powered down before, not die on a closed segment later.
     */
    @Test
    void aFunctionRemovedByTheBusPowersTheFirmwareDownBeforeItsBarIsFreed() throws Exception {
        cmdInit();
        String fwName = "fw-" + fn.bdf();
        Thread firmware = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(fwName)).findFirst().orElseThrow();
        List<Throwable> died = new java.util.concurrent.CopyOnWriteArrayList<>();
        firmware.setUncaughtExceptionHandler((t, e) -> died.add(e));
        for (long iova : iovas) { // the driver's unmaps (the domain goes with the function)
            fn.dma().dmaUnmap(iova, 1);
        }
        iovas.clear();
        fn.remove();
        assertTrue(!firmware.isAlive(), "the firmware thread ended with the removal");
        firmware.join(1000);
        assertEquals(List.of(), died, "the firmware thread ended quietly");
    }

    @Test
    void bringUpThroughTheCommandQueueWithOutputInAMailbox() {
        assertEquals(0x1013, fn.deviceId());
        cmdInit();
        assertEquals(16, fn.read32be(0, InitSeg.FW_REV) & 0xffff, "ConnectX-4 firmware major 16");
        assertEquals(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, simple(Mlx5Cmd.QUERY_ISSI), "nothing but ENABLE_HCA before ENABLE_HCA");
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.ENABLE_HCA));
        Cmd q = new Cmd(1, Mlx5Cmd.QUERY_ISSI, 0, 16, Mlx5Cmd.QUERY_ISSI_OUT_LEN).run();
        assertEquals(Mlx5Cmd.STAT_OK, q.status());
        assertEquals(1, q.outBoxes.size(), "112 bytes of output: one mailbox block");
        assertEquals(0b11, q.out.get(BE32, Mlx5Cmd.QUERY_ISSI_OUT_SUPPORTED), "ISSI 0 and 1 supported, read from the mailbox");
        assertEquals(0, q.out.get(BE32, 8) & 0xffff);
        Cmd set = new Cmd(2, Mlx5Cmd.SET_ISSI, 0, 16, 16);
        set.in.set(BE32, 8, 1);
        assertEquals(Mlx5Cmd.STAT_OK, set.run().status());
        assertEquals(1, new Cmd(3, Mlx5Cmd.QUERY_ISSI, 0, 16, Mlx5Cmd.QUERY_ISSI_OUT_LEN).run().out.get(BE32, 8) & 0xffff);
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.DISABLE_HCA));
        assertEquals(6, dev.commandsExecuted(), "every command delivered, the refused one too");
        assertEquals(0, dev.deliveryErrors());
        assertTrue(fn.read32be(0, InitSeg.HEALTH_COUNTER) != 0, "the health counter advances while the firmware lives");
    }

    @Test
    void badCommandsGetTheirStatusAndTheQueueGoesOn() {
        cmdInit();
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.ENABLE_HCA));
        Cmd unknown = new Cmd(0, 0x7777, 0, 16, 16).run();
        assertEquals(Mlx5Cmd.STAT_BAD_OP_ERR, unknown.status());
        assertEquals(Syndromes.SYND_UNKNOWN_OPCODE, unknown.syndrome());
        Cmd shortOut = new Cmd(1, Mlx5Cmd.QUERY_ISSI, 0, 16, 16).run();
        assertEquals(Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR, shortOut.status(), "QUERY_ISSI needs 0x70 bytes of output");
        Cmd badIssi = new Cmd(2, Mlx5Cmd.SET_ISSI, 0, 16, 16);
        badIssi.in.set(BE32, 8, 7);
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, badIssi.run().status());
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.NOP), "good commands still run after bad ones");
    }

    @Test
    void malformedEntriesAndMailboxChainsGetTheirDeliveryStatus() {
        cmdInit();
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.ENABLE_HCA));
        assertEquals(CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR, delivery(new Cmd(0, Mlx5Cmd.NOP, 0, 16, 16) {
            @Override
            void tamper(MemorySegment e) {
                e.set(ValueLayout.JAVA_BYTE, CmdEntry.TYPE, (byte) 3);
            }
        }), "type is not PCI_CMD_XPORT");
        assertEquals(CmdEntry.DELIVERY_IN_LENGTH_ERR, delivery(new Cmd(0, Mlx5Cmd.NOP, 0, 16, 16) {
            @Override
            void tamper(MemorySegment e) {
                e.set(BE32, CmdEntry.INPUT_LENGTH, 8);
            }
        }));
        assertEquals(CmdEntry.DELIVERY_OUT_LENGTH_ERR, delivery(new Cmd(0, Mlx5Cmd.NOP, 0, 16, 16) {
            @Override
            void tamper(MemorySegment e) {
                e.set(BE32, CmdEntry.OUTPUT_LENGTH, -1);
            }
        }));
        assertEquals(CmdEntry.DELIVERY_IN_PTR_ALIGN_ERR, delivery(new Cmd(0, Mlx5Cmd.SET_ISSI, 0, 600, 16) {
            @Override
            void tamper(MemorySegment e) {
                e.set(BE64, CmdEntry.IN_PTR, inPtr + 64);
            }
        }));
        assertEquals(CmdEntry.DELIVERY_OUT_PTR_ALIGN_ERR, delivery(new Cmd(0, Mlx5Cmd.QUERY_ISSI, 0, 16, 0x70) {
            @Override
            void tamper(MemorySegment e) {
                e.set(BE64, CmdEntry.OUT_PTR, outPtr + 8);
            }
        }));
        Cmd wrongBlock = new Cmd(0, Mlx5Cmd.SET_ISSI, 0, 1200, 16); // three input blocks
        wrongBlock.inBoxes.get(1).mem().set(BE32, CmdMailbox.BLOCK_NUM, 5);
        assertEquals(CmdEntry.DELIVERY_BAD_BLOCK_NUMBER, delivery(wrongBlock));
        Cmd loop = new Cmd(0, Mlx5Cmd.SET_ISSI, 0, 1200, 16);
        loop.inBoxes.get(1).mem().set(BE64, CmdMailbox.NEXT, loop.inBoxes.get(0).iova()); // block 1 points back to block 0
        assertEquals(CmdEntry.DELIVERY_BAD_BLOCK_NUMBER, delivery(loop), "a loop meets a block number out of order");
        Cmd shortChain = new Cmd(0, Mlx5Cmd.SET_ISSI, 0, 1200, 16);
        shortChain.inBoxes.get(1).mem().set(BE64, CmdMailbox.NEXT, 0);
        assertEquals(CmdEntry.DELIVERY_BAD_BLOCK_NUMBER, delivery(shortChain), "the chain ends before the input does");
        Cmd wrongToken = new Cmd(0, Mlx5Cmd.QUERY_ISSI, 0, 16, 0x70);
        wrongToken.outBoxes.get(0).mem().set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, (byte) 99);
        assertEquals(CmdEntry.DELIVERY_TOKEN_ERR, delivery(wrongToken));
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.NOP), "the device goes on after every bad entry");
        assertEquals(9, dev.deliveryErrors());
    }

    @Test
    void aMailboxOutsideTheFunctionsMappingsIsRefusedAndCounted() {
        cmdInit();
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.ENABLE_HCA));
        Cmd stray = new Cmd(0, Mlx5Cmd.SET_ISSI, 0, 600, 16) {
            @Override
            void tamper(MemorySegment e) {
                e.set(BE64, CmdEntry.IN_PTR, 0x7_0000_0000L); // never mapped
            }
        };
        assertEquals(CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR, delivery(stray));
        assertEquals(1, iommu.audit().faults(), "the stray DMA was stopped by the IOMMU");
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.NOP));
        expectedFaults = 1;
    }

    /** A command whose input is a header and a 24-bit index at byte 9 (ALLOC/DEALLOC of UARs, PDs, ...). */
    Cmd indexed(int slot, int opcode, int opMod, int index) {
        Cmd c = new Cmd(slot, opcode, opMod, 16, 16);
        Pages.INDEX24.set(c.in, 0, index);
        return c;
    }

    Cmd give(int slot, long... iovas) {
        Cmd c = new Cmd(slot, Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_GIVE, 16 + 8 * iovas.length, 16);
        c.in.set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, iovas.length);
        for (int i = 0; i < iovas.length; i++) {
            c.in.set(BE64, Pages.MANAGE_IN_PAS + 8L * i, iovas[i]);
        }
        return c;
    }

    long[] pages(int n) {
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = page().iova();
        }
        return out;
    }

    @Test
    void firmwarePagesAreCheckedTakenAndHeldUntilHandedBack() {
        cmdInit();
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.ENABLE_HCA));
        Cmd q = new Cmd(0, Mlx5Cmd.QUERY_PAGES, Pages.QUERY_BOOT, 16, 16).run();
        assertEquals(Mlx5Cmd.STAT_OK, q.status());
        int boot = q.out.get(BE32, Pages.QUERY_OUT_NUM_PAGES);
        assertEquals(4, boot, "boot pages wanted");
        long[] p = pages(boot);
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, give(0, p[0] + 8).run().status(), "a page not 4 KiB aligned");
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, give(0, p[0], p[0]).run().status(), "the same page twice");
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, give(0, p[1], 0x7_0000_0000L).run().status(), "a page not mapped for the device");
        expectedFaults = 1;
        assertEquals(0, dev.pagesHeld(), "a refused list is taken whole or not at all");
        assertEquals(Mlx5Cmd.STAT_OK, give(0, p).run().status());
        assertEquals(4, dev.pagesHeld());
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, give(0, p[2]).run().status(), "a page the firmware already holds");
        assertEquals(0, new Cmd(0, Mlx5Cmd.QUERY_PAGES, Pages.QUERY_BOOT, 16, 16).run().out.get(BE32, Pages.QUERY_OUT_NUM_PAGES));
        assertEquals(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, simple(Mlx5Cmd.INIT_HCA), "INIT_HCA before the init pages");
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, new Cmd(0, Mlx5Cmd.QUERY_PAGES, 7, 16, 16).run().status(), "no op_mod 7");
        assertEquals(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, simple(Mlx5Cmd.DISABLE_HCA), "DISABLE_HCA while the firmware holds pages");
        Cmd take = new Cmd(0, Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_TAKE, 16, 16 + 8 * 10);
        take.in.set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, 10);
        assertEquals(Mlx5Cmd.STAT_OK, take.run().status());
        assertEquals(4, take.out.get(BE32, Pages.MANAGE_OUT_NUM_ENTRIES), "fewer than asked: all it holds");
        java.util.Set<Long> back = new java.util.HashSet<>();
        for (int i = 0; i < 4; i++) {
            back.add(take.out.get(BE64, Pages.MANAGE_OUT_PAS + 8L * i));
        }
        assertEquals(java.util.Set.of(p[0], p[1], p[2], p[3]), back);
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.DISABLE_HCA));
    }

    @Test
    void aCommandShortOfPagesIsParkedUntilTheDriverGivesThem() {
        cmdInit();
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.ENABLE_HCA));
        assertEquals(Mlx5Cmd.STAT_OK, give(0, pages(4 + 2)).run().status()); // boot, then init pages
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.INIT_HCA));
        Cmd uar = new Cmd(0, Mlx5Cmd.ALLOC_UAR, 0, 16, 16).run();
        assertEquals(Mlx5Cmd.STAT_OK, uar.status());
        int uarIndex = Pages.INDEX24.get(uar.out, 0);
        Page ring = page();
        for (long off = Eq.EQE_OWNER; off < 4096; off += Eq.EQE_SIZE) {
            ring.mem().set(ValueLayout.JAVA_BYTE, off, (byte) 1);
        }
        // the pages EQ: 64 entries in one page, page requests only
        Cmd pagesEq = createEq(0, uarIndex, 1L << Eq.EVENT_PAGE_REQUEST, ring.iova());
        assertEquals(Mlx5Cmd.STAT_OK, pagesEq.run().status());
        // each EQ context takes 1 KiB of the firmware's pages: the two init pages hold 8; the firmware asks for more at once
        // (the event follows the command's completion, as an EQE follows a CQE: wait for its owner bit, bounded)
        MemorySegment eqe = ring.mem().asSlice(0, Eq.EQE_SIZE);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        java.lang.invoke.VarHandle ownerByte = ValueLayout.JAVA_BYTE.varHandle();
        while (((byte) ownerByte.getVolatile(eqe, Eq.EQE_OWNER) & 1) != 0) {
            assertTrue(System.nanoTime() < deadline, "a page request in the ring (owner of the first pass) within 10 s");
            Thread.onSpinWait();
        }
        assertEquals(Eq.EVENT_PAGE_REQUEST, eqe.get(ValueLayout.JAVA_BYTE, Eq.EQE_TYPE));
        int wanted = eqe.get(BE32, Eq.PAGE_REQ_NUM_PAGES);
        assertTrue(wanted > 0, "the firmware wants pages: " + wanted);
        for (int i = 0; i < 7; i++) {
            assertEquals(Mlx5Cmd.STAT_OK, createEq(0, uarIndex, 0, page().iova()).run().status(), "EQ " + i);
        }
        Cmd parked = createEq(1, uarIndex, 0, page().iova()).start();
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.NOP), "the firmware goes on with other commands");
        assertTrue(parked.owned(), "the command short of pages is parked, its entry still with the hardware");
        // the EQ was never armed: the request was written without an interrupt, not lost, so it
        // stays the one outstanding request and is not raised again
        assertEquals(1, ring.mem().get(ValueLayout.JAVA_BYTE, Eq.EQE_SIZE + Eq.EQE_OWNER) & 1,
                "no second page request while the first is outstanding");
        assertEquals(Mlx5Cmd.STAT_OK, give(31, pages(wanted)).run().status());
        assertEquals(Mlx5Cmd.STAT_OK, parked.finish().status(), "run again once the pages came: " + dev.lastRefusal());
        assertTrue(dev.describe().contains("EQs 9"), dev.describe());
        // teardown: force close drops every object, then every page comes back
        Cmd teardown = new Cmd(0, Mlx5Cmd.TEARDOWN_HCA, 0, 16, 16);
        assertEquals(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, teardown.run().status(), "graceful teardown with objects live");
        teardown = new Cmd(0, Mlx5Cmd.TEARDOWN_HCA, 0, 16, 16);
        Pages.TEARDOWN_PROFILE.set(teardown.in, 0, Pages.TEARDOWN_FORCE_CLOSE);
        assertEquals(Mlx5Cmd.STAT_OK, teardown.run().status());
        Cmd take = new Cmd(0, Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_TAKE, 16, 16 + 8 * 64);
        take.in.set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, 64);
        assertEquals(Mlx5Cmd.STAT_OK, take.run().status());
        assertEquals(6 + wanted, take.out.get(BE32, Pages.MANAGE_OUT_NUM_ENTRIES));
        assertEquals(Mlx5Cmd.STAT_OK, simple(Mlx5Cmd.DISABLE_HCA));
        assertEquals(0, dev.pagesHeld());
    }

    /**
     * {@link ConnectX4Device#close} by a thread whose interrupt flag is already set (an earlier
     * interruption nobody cleared: a test thread a previous test interrupted) while the firmware
     * is inside a command: the close still waits, bounded, for the firmware thread to end, and
     * hands the interruption back afterwards. Before the fix the close returned at once from its
     * join (the flag made it throw), leaving the firmware mid-command after close returned, and
     * every later close of that thread did the same.
     */
    @Test
    void aCloseByAnInterruptedThreadStillWaitsForTheCommandInFlightAndKeepsTheInterrupt() throws Exception {
        closeWithACommandInFlight(true);
    }

    /** As above, the interruption arriving while the close waits for the firmware: it goes on waiting. */
    @Test
    void aCloseInterruptedWhileItWaitsForTheFirmwareGoesOnWaiting() throws Exception {
        closeWithACommandInFlight(false);
    }

    /** Whether {@code t} waits (timed) in {@link Thread#join}: the close's wait for the firmware. */
    static boolean joining(Thread t) {
        return t.getState() == Thread.State.TIMED_WAITING
                && Arrays.stream(t.getStackTrace()).anyMatch(f -> f.getClassName().equals("java.lang.Thread") && f.getMethodName().equals("join"));
    }

    /**
     * The close with the firmware inside a command whose input mailbox is on a peer's BAR whose
     * read completes only when the test says so (a slow PCIe completion no interrupt cuts short).
     * The test thread is interrupted before the close ({@code before}) or by a helper once the
     * close waits in its join; the helper completes the read once the close waits (again), after
     * 10 s at the latest (then the close did not wait and the test fails).
     */
    void closeWithACommandInFlight(boolean before) throws Exception {
        cmdInit();
        CountDownLatch reading = new CountDownLatch(1);
        CountDownLatch complete = new CountDownLatch(1);
        MemorySegment peerPage = Arena.ofAuto().allocate(4096, 4096);
        PciFunction peer = bus.register(PciDeviceSpec.builder("slow-peer").vendorId(0x1af4).deviceId(0x10ff).classCode(0x058000)
                .aperture(0, 4096, off -> {
                    reading.countDown();
                    boolean done = false;
                    while (!done) { // a read completion: not cut short by an interrupt
                        try {
                            done = complete.await(10, TimeUnit.SECONDS);
                        } catch (InterruptedException e) {
                            // the firmware's power-off interrupt: the completion is still on its way
                        }
                    }
                    return peerPage;
                }).build());
        long peerIova = fn.dma().dmaMapResource(peer.resource(0), 0, 4096, DmaDirection.BIDIRECTIONAL);
        try {
            peerPage.set(BE64, CmdMailbox.NEXT, 0);
            peerPage.set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, token);
            Cmd c = new Cmd(0, Mlx5Cmd.QUERY_ISSI, 0, CmdEntry.INLINE + 16, 16);
            c.inPtr = peerIova;
            c.start();
            assertTrue(reading.await(10, TimeUnit.SECONDS), "the firmware reads the input mailbox on the peer's BAR");
            Thread firmware = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("fw-" + fn.bdf()))
                    .findFirst().orElse(null);
            assertNotNull(firmware, "the firmware thread");
            Thread closer = Thread.currentThread();
            Thread helper = Thread.ofPlatform().start(() -> {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                if (!before) {
                    while (!joining(closer) && System.nanoTime() < deadline) {
                        Thread.onSpinWait();
                    }
                    closer.interrupt();
                }
                // the join the interrupt ended (if any) is over once the flag is consumed and the close waits again
                while (!(joining(closer) && !closer.isInterrupted()) && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                complete.countDown();
            });
            if (before) {
                closer.interrupt();
            }
            dev.close();
            boolean firmwareAlive = firmware.isAlive();
            boolean interrupted = Thread.interrupted();
            complete.countDown();
            helper.join();
            firmware.join(10_000);
            assertTrue(interrupted, "the caller's interruption is handed back after the close");
            assertFalse(firmwareAlive, "the firmware thread ended before the close returned (its command was in flight)");
        } finally {
            complete.countDown();
            fn.dma().dmaUnmap(peerIova, 1);
        }
    }

    /** CREATE_EQ of a 64-entry EQ in one page on {@code uar}, vector 0. */
    Cmd createEq(int slot, int uar, long mask, long ringIova) {
        Cmd c = new Cmd(slot, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8, 16);
        Eq.EQC_LOG_EQ_SIZE.set(c.in, Eq.CREATE_EQ_IN_EQC, 6);
        Eq.EQC_UAR_PAGE.set(c.in, Eq.CREATE_EQ_IN_EQC, uar);
        c.in.set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, mask);
        c.in.set(BE64, Eq.CREATE_EQ_IN_PAS, ringIova);
        return c;
    }

    static int delivery(Cmd c) {
        return c.run().delivery;
    }
}
