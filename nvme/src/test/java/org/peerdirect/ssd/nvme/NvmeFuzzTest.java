package org.peerdirect.ssd.nvme;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.ssd.regs.NvmeCommand.*;
import static org.peerdirect.ssd.regs.NvmeRegs.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.ssd.model.NvmeSsd;
import org.peerdirect.ssd.nvme.host.NvmeDev;

/**
 * Fuzzes the NVMe register file and admin queue from the driver's side: random writes (32 and 64
 * bits) to every register of BAR0, defined, read-only and reserved ({@code CC} with random enable,
 * shutdown, page size, command set and arbitration bits; {@code AQA}, {@code ASQ}, {@code ACQ}
 * with zero, unaligned, unmapped and random addresses; {@code PMRCTL}, {@code PMRMSC}); doorbell
 * writes to every doorbell of the 16 KiB BAR with values inside and outside the queue; admin
 * commands through the driver's passthrough with random opcodes, flags, CNS, namespaces and data
 * pointers (mapped, unaligned, unmapped, inside a page with and without PRP2), and fully random
 * 64-byte entries. For each operation:
 * <ul>
 * <li>the read-only registers ({@code CAP}, {@code VS}, {@code PMRCAP}, {@code PMREBS},
 * {@code PMRSWTP}) read back their value, a reserved one 0;</li>
 * <li>an admin command comes back with a status the specification defines, and where the
 * entry decides it the status is the one an independent reading predicts (unknown opcode,
 * FUSE/PSDT, PRP offset, unmapped data pointer, CNS, namespace); or, when the fuzz reset the
 * controller under the driver, the driver resets it and the command completes on the retry;</li>
 * <li>an invalid doorbell is counted by the controller (an asynchronous event);</li>
 * <li>nothing blocks past the admin timeout (set to 100 ms for the fuzz).</li>
 * </ul>
 * Every 500 operations and at the end the driver must still work: a controller reset, Identify
 * with the model's name, a PMR write read back through the BAR and the PMRSTS barrier. Each round
 * ends with the driver's shutdown and the audit: no use-after-free and no free while mapped (DMA
 * to unmapped addresses is expected and only counted as faults), no mapping left, every frame
 * free, no BAR handler failure. Coverage is asserted (statuses, fatal errors, events, resets).
 *
 * <p>Short in CI (20 000 operations). The long form, ≥ 10⁶ operations:
 * <pre>
 * mvn -o -pl nvme verify -Dtest=NvmeFuzzTest -Dsurefire.failIfNoSpecifiedTests=false -Dnvme.fuzz.ops=1000000
 * </pre>
 * {@code -Dnvme.fuzz.seed=N} replays a run (the seed is printed with every failure). The default
 * seed is fixed: the coverage assertions at the end (CSTS.CFS reached, six statuses, ...) hold for
 * seed 1 but not for every seed (20 000 random ops missed CSTS.CFS with seeds 2 and
 * 28208291373300, which failed CI once), so a random default made CI flaky; other seeds explore.
 */
class NvmeFuzzTest {

    static final long OPS = Long.getLong("nvme.fuzz.ops", 20_000);
    static final long SEED = Long.getLong("nvme.fuzz.seed", 1);
    static final int ROUND = 5_000;
    static final int CHECK_EVERY = 500;
    /** No IOVA of a 32 MiB machine reaches this: DMA there is an IOMMU fault. */
    static final long UNMAPPED = 0x7_0000_0000L;
    static final Set<Integer> STATUSES = Set.of(NVME_SC_SUCCESS, NVME_SC_INVALID_OPCODE, NVME_SC_INVALID_FIELD, NVME_SC_CMDID_CONFLICT,
            NVME_SC_DATA_XFER_ERROR, NVME_SC_INVALID_NS, NVME_SC_PRP_INVALID_OFFSET, NVME_SC_ASYNC_LIMIT);
    static final int[] REGS = {NVME_REG_CAP, NVME_REG_CAP + 4, NVME_REG_VS, NVME_REG_INTMS, NVME_REG_INTMC, NVME_REG_CC, 0x18, NVME_REG_CSTS,
            NVME_REG_NSSR, NVME_REG_AQA, NVME_REG_ASQ, NVME_REG_ASQ + 4, NVME_REG_ACQ, NVME_REG_ACQ + 4, NVME_REG_CMBLOC, NVME_REG_CMBSZ,
            NVME_REG_PMRCAP, NVME_REG_PMRCTL, NVME_REG_PMRSTS, NVME_REG_PMREBS, NVME_REG_PMRSWTP, NVME_REG_PMRMSCL, NVME_REG_PMRMSCU};
    static final int[] OPCODES = {nvme_admin_identify, nvme_admin_get_features, nvme_admin_set_features, nvme_admin_abort_cmd,
            nvme_admin_get_log_page, nvme_admin_create_sq, nvme_admin_create_cq, nvme_admin_delete_sq, nvme_admin_keep_alive, 0x7f, 0xff, 0xc0};

    static final Map<String, Long> COUNTS = new TreeMap<>();
    static String previousTimeout;

    @TempDir
    Path tmp;

    @BeforeAll
    static void shortAdminTimeout() {
        previousTimeout = System.setProperty(NvmeDev.ADMIN_TIMEOUT_PROPERTY, "100");
    }

    @AfterAll
    static void restore() {
        if (previousTimeout == null) {
            System.clearProperty(NvmeDev.ADMIN_TIMEOUT_PROPERTY);
        } else {
            System.setProperty(NvmeDev.ADMIN_TIMEOUT_PROPERTY, previousTimeout);
        }
    }

    static synchronized void count(String what) {
        COUNTS.merge(what, 1L, Long::sum);
    }

    /** One machine, one SSD, its driver, a data page the fuzz hands as a good PRP. */
    final class Rig implements AutoCloseable {
        final Mm mm;
        final Iommu iommu;
        final StandalonePciBus bus;
        final NvmeSsd ssd;
        final PciFunction fn;
        final NvmePmr pmr;
        final long dataPfn;
        final long dataIova;
        final MemorySegment cmd = Arena.ofAuto().allocate(SQE_SIZE, 8);

        Rig(int round) {
            mm = new Mm(32L << 20, true, tmp.resolve("swap" + round), 1 << 20);
            iommu = new Iommu(mm);
            bus = new StandalonePciBus(iommu);
            ssd = new NvmeSsd("Samsung PM173X NVMe SSD", tmp.resolve("nvme" + round + ".pmr"), 64 << 10);
            fn = bus.register(ssd.spec());
            pmr = new NvmePmr(mm, fn, 0);
            dataPfn = mm.allocPages(1); // two pages: PRP1 inside the first, PRP2 the second
            dataIova = fn.dma().dmaMapSg(new long[] {dataPfn, dataPfn + 1}, DmaDirection.BIDIRECTIONAL);
        }

        @Override
        public void close() {
            assertEquals(List.of(), pmr.shutdown(), "a clean shutdown after the fuzz");
            fn.dma().dmaUnmap(dataIova, 2);
            mm.freePages(dataPfn, 1);
            fn.remove();
            ssd.close();
            bus.close();
            IommuAudit a = iommu.audit();
            synchronized (NvmeFuzzTest.class) {
                COUNTS.merge("iommu faults (expected)", a.faults(), Long::sum);
            }
            assertTrue(a.violationFree(), "no use-after-free, no free while mapped: " + a);
            assertEquals(0, a.liveMappings(), "no mapping left: " + a);
            assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
            assertEquals(List.of(), bus.warnings(), "no BAR handler failed");
            mm.close();
        }
    }

    @Test
    void theRegisterFileAndAdminQueueAnswerEveryInputAndTheDriverStaysUsable() {
        long done = 0;
        int round = 0;
        SplittableRandom rnd = new SplittableRandom(SEED);
        try {
            while (done < OPS) {
                try (Rig rig = new Rig(round++)) {
                    long n = Math.min(ROUND, OPS - done);
                    for (long i = 0; i < n; i++) {
                        step(rig, rnd);
                        if ((i + 1) % CHECK_EVERY == 0) {
                            usable(rig);
                        }
                    }
                    usable(rig);
                    NvmeSsd.ControllerCounters c = rig.ssd.controller();
                    synchronized (NvmeFuzzTest.class) {
                        COUNTS.merge("controller: fatal errors (CSTS.CFS)", c.fatalErrors(), Long::sum);
                        COUNTS.merge("controller: invalid doorbells", c.invalidDoorbells(), Long::sum);
                        COUNTS.merge("controller: writes without effect", c.ignoredWrites(), Long::sum);
                        COUNTS.merge("driver: resets", rig.pmr.info().resets(), Long::sum);
                        COUNTS.merge("driver: async events", rig.pmr.info().asyncEvents(), Long::sum);
                    }
                    done += n;
                }
            }
        } catch (AssertionError | RuntimeException e) {
            throw new AssertionError("NvmeFuzzTest seed " + SEED + " (-Dnvme.fuzz.seed=" + SEED + "), after " + done + " ops: " + e, e);
        }
        System.out.println("NvmeFuzzTest seed " + SEED + ", " + done + " ops: " + COUNTS);
        assertTrue(COUNTS.keySet().stream().filter(k -> k.startsWith("status ")).count() >= 6, "at least six distinct statuses reached: " + COUNTS);
        assertTrue(COUNTS.getOrDefault("controller: fatal errors (CSTS.CFS)", 0L) > 0, "the fuzz reached CSTS.CFS: " + COUNTS);
        assertTrue(COUNTS.getOrDefault("controller: invalid doorbells", 0L) > 0, "the fuzz reached invalid doorbells: " + COUNTS);
        assertTrue(COUNTS.getOrDefault("driver: async events", 0L) > 0, "the driver received asynchronous events: " + COUNTS);
        assertTrue(COUNTS.getOrDefault("driver: resets", 0L) > 0, "the driver reset the controller: " + COUNTS);
    }

    private void step(Rig rig, SplittableRandom rnd) {
        int kind = rnd.nextInt(10);
        if (kind < 4) {
            registerWrite(rig, rnd);
        } else if (kind < 6) {
            doorbellWrite(rig, rnd);
        } else {
            adminCommand(rig, rnd);
        }
    }

    private static long address(Rig rig, SplittableRandom rnd) {
        return switch (rnd.nextInt(6)) {
            case 0 -> 0;
            case 1 -> UNMAPPED + (rnd.nextInt(16) << 12);
            case 2 -> rig.dataIova + 1 + rnd.nextInt(4095);
            case 3 -> rnd.nextLong();
            case 4 -> rig.dataIova + 4096 * 100L; // past the data pages: unmapped
            default -> UNMAPPED | rnd.nextInt(1 << 12);
        };
    }

    private void registerWrite(Rig rig, SplittableRandom rnd) {
        int off = rnd.nextInt(4) == 0 ? rnd.nextInt(0x1000 / 4) * 4 : REGS[rnd.nextInt(REGS.length)];
        long value = switch (off) {
            case NVME_REG_CC -> (rnd.nextInt(3) == 0 ? rnd.nextInt() : (rnd.nextBoolean() ? NVME_CC_ENABLE : 0)
                    | (rnd.nextInt(4) == 0 ? NVME_CC_SHN_NORMAL : 0) | (rnd.nextInt(4) == 0 ? rnd.nextInt(16) << NVME_CC_MPS_SHIFT : 0)
                    | (rnd.nextInt(8) == 0 ? 1 << NVME_CC_CSS_SHIFT : 0) | NVME_CC_IOSQES | NVME_CC_IOCQES) & 0xffff_ffffL;
            case NVME_REG_AQA -> rnd.nextInt(3) == 0 ? 0 : rnd.nextInt();
            case NVME_REG_ASQ, NVME_REG_ACQ -> address(rig, rnd);
            case NVME_REG_PMRCTL -> rnd.nextInt(2);
            default -> rnd.nextLong();
        };
        boolean wide = off % 8 == 0 && rnd.nextInt(3) == 0;
        if (wide) {
            rig.fn.write64(0, off, value);
            count("write64");
        } else {
            rig.fn.write32(0, off, (int) value);
            count("write32");
        }
        assertEquals(0x00010400, rig.fn.read32(0, NVME_REG_VS), "VS read-only");
        assertTrue((rig.fn.read64(0, NVME_REG_CAP) & NVME_CAP_PMRS) != 0, "CAP read-only");
        int pmrcap = rig.fn.read32(0, NVME_REG_PMRCAP);
        assertEquals(NvmeSsd.PMR_BAR, (pmrcap >>> PMRCAP_BIR_SHIFT) & 7, "PMRCAP read-only");
        assertEquals(0, rig.fn.read32(0, NVME_REG_PMRMSCL), "PMRMSC reserved without PMRCAP.CMSS");
        assertEquals(0, rig.fn.read32(0, 0x18), "reserved");
        assertEquals(0, rig.fn.read32(0, 0x100), "reserved");
    }

    /**
     * An invalid doorbell (no such queue, a value outside any queue) is never taken: the
     * controller counts it as an asynchronous event when running, as a write without effect
     * when not. (Which of the two is not predictable here: the driver's MSI-X thread may post an
     * Asynchronous Event Request meanwhile, and a fuzzed ASQ can make that fetch fatal.)
     */
    private void doorbellWrite(Rig rig, SplittableRandom rnd) {
        NvmeSsd.ControllerCounters before = rig.ssd.controller();
        int db = rnd.nextInt(3) == 0 ? 2 + rnd.nextInt((int) ((NvmeSsd.BAR0_SIZE - NVME_REG_DBS) / 4) - 2) : rnd.nextInt(2);
        int value = rnd.nextInt(4) == 0 ? rnd.nextInt() : rnd.nextInt(rnd.nextBoolean() ? 32 : 5000);
        rig.fn.write32(0, NVME_REG_DBS + 4L * db, value);
        NvmeSsd.ControllerCounters after = rig.ssd.controller();
        if (db > 1 || value < 0 || value >= 4096) {
            assertTrue(after.invalidDoorbells() + after.ignoredWrites() > before.invalidDoorbells() + before.ignoredWrites(),
                    "an invalid doorbell (" + db + ", " + value + ") is an event or a write without effect");
        }
        count(db > 1 ? "doorbell of no queue" : "doorbell of the admin queue");
    }

    private void adminCommand(Rig rig, SplittableRandom rnd) {
        MemorySegment c = rig.cmd;
        c.fill((byte) 0);
        Integer expect = null;
        if (rnd.nextInt(8) == 0) {
            for (int i = 0; i < SQE_SIZE; i += 8) {
                c.set(ValueLayout.JAVA_LONG_UNALIGNED, i, rnd.nextLong());
            }
            if ((c.get(ValueLayout.JAVA_BYTE, 0) & 0xff) == nvme_admin_async_event) {
                c.set(ValueLayout.JAVA_BYTE, 0, (byte) nvme_admin_identify);
            }
        } else {
            int op = OPCODES[rnd.nextInt(OPCODES.length)];
            int flags = rnd.nextInt(6) == 0 ? rnd.nextInt(256) : 0;
            int cns = rnd.nextInt(4) == 0 ? rnd.nextInt(256) : rnd.nextInt(3);
            int nsid = rnd.nextInt(4) == 0 ? rnd.nextInt() : rnd.nextInt(3) == 0 ? -1 : 1;
            long prp1 = rnd.nextInt(3) == 0 ? address(rig, rnd) : rig.dataIova + (rnd.nextInt(4) == 0 ? 4 * rnd.nextInt(1024) : 0);
            long prp2 = rnd.nextBoolean() ? rig.dataIova + 4096 : address(rig, rnd);
            c.set(ValueLayout.JAVA_BYTE, SQE_OPCODE, (byte) op);
            c.set(ValueLayout.JAVA_BYTE, SQE_FLAGS, (byte) flags);
            c.set(LE32, SQE_NSID, nsid);
            c.set(LE64, SQE_PRP1, prp1);
            c.set(LE64, SQE_PRP2, prp2);
            c.set(LE32, SQE_CDW10, op == nvme_admin_identify ? cns : rnd.nextInt(4) == 0 ? rnd.nextInt() : NVME_FEAT_ASYNC_EVENT);
            expect = predict(rig, op, flags, cns, nsid, prp1, prp2);
        }
        NvmePmr.AdminCompletion r;
        try {
            r = rig.pmr.adminCommand(c);
        } catch (KernelException e) {
            // the fuzz left the controller unable to run even after the driver's reset (a reset needs the fuzz's CC undone: it is)
            count("admin: " + e.errno());
            return;
        }
        assertTrue(STATUSES.contains(r.status()), "a defined status: " + statusName(r.status()));
        if (expect != null) {
            assertEquals(statusName(expect), statusName(r.status()), "the status the entry decides");
        }
        count("status " + statusName(r.status()));
    }

    /** The status an admin entry decides by itself, or null where the controller's state decides. */
    private static Integer predict(Rig rig, int op, int flags, int cns, int nsid, long prp1, long prp2) {
        if ((flags & (FLAGS_FUSE_MASK | FLAGS_PSDT_MASK)) != 0) {
            return NVME_SC_INVALID_FIELD;
        }
        if (op != nvme_admin_identify) {
            return switch (op) {
                case nvme_admin_abort_cmd -> NVME_SC_SUCCESS;
                case nvme_admin_get_features, nvme_admin_set_features -> null; // FID from a random CDW10
                default -> NVME_SC_INVALID_OPCODE;
            };
        }
        if (cns == NVME_ID_CNS_NS) {
            return NVME_SC_INVALID_NS;
        }
        if (cns == NVME_ID_CNS_NS_ACTIVE_LIST && (nsid == -1 || nsid == -2)) {
            return NVME_SC_INVALID_NS;
        }
        if (cns != NVME_ID_CNS_CTRL && cns != NVME_ID_CNS_NS_ACTIVE_LIST) {
            return NVME_SC_INVALID_FIELD;
        }
        boolean inPage = (prp1 & 4095) != 0;
        if ((prp1 & 3) != 0 || (inPage && (prp2 & 4095) != 0)) {
            return NVME_SC_PRP_INVALID_OFFSET;
        }
        boolean firstOk = prp1 >= rig.dataIova && prp1 < rig.dataIova + 4096;
        if (firstOk) {
            return !inPage || prp2 == rig.dataIova + 4096 ? NVME_SC_SUCCESS : unmapped(rig, prp2) ? NVME_SC_DATA_XFER_ERROR : null;
        }
        return unmapped(rig, prp1) ? NVME_SC_DATA_XFER_ERROR : null;
    }

    /** Addresses no mapping of the rig reaches: 0 (below the IOVA space), the fuzz's high ones, past the data pages. */
    private static boolean unmapped(Rig rig, long a) {
        return (a >= 0 && a < 4096) || (a >= UNMAPPED && a < UNMAPPED + (1 << 20)) || (a & -4096L) == rig.dataIova + 4096 * 100L;
    }

    /** The driver after the fuzz: a reset, Identify, the PMR through its BAR, the barrier. */
    private static void usable(Rig rig) {
        rig.pmr.reset();
        MemorySegment c = rig.cmd;
        c.fill((byte) 0);
        c.set(ValueLayout.JAVA_BYTE, SQE_OPCODE, (byte) nvme_admin_identify);
        c.set(LE64, SQE_PRP1, rig.dataIova);
        c.set(LE32, SQE_CDW10, NVME_ID_CNS_CTRL);
        assertEquals(NVME_SC_SUCCESS, rig.pmr.adminCommand(c).status(), "Identify after the fuzz");
        MemorySegment id = rig.mm.pageAddress(rig.dataPfn, 1);
        String mn = new String(id.asSlice(ID_CTRL_MN, ID_CTRL_MN_LEN).toArray(ValueLayout.JAVA_BYTE), java.nio.charset.StandardCharsets.US_ASCII);
        assertEquals("Samsung PM173X NVMe SSD", mn.strip());
        byte[] b = {1, 2, 3, 4, 5};
        rig.pmr.write(100, b);
        assertArrayEquals(b, rig.pmr.read(100, 5));
        rig.pmr.flush();
        count("usable");
    }
}
