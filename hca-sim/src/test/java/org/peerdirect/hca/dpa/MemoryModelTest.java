package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpa.DpaNic.QueueKind;
import org.peerdirect.hca.dpa.progs.MmProgs;
import org.peerdirect.hca.dpa.progs.OutboxProgs;

/**
 * The checked memory model (DPA_MODEL.md §3.4, §3.5), litmus style in deterministic mode: each
 * check trips on its mutant and stays silent on the fixed code, for several seeds.
 */
class MemoryModelTest extends DpaRig {

    static byte[] image() {
        ImagePackager p = new ImagePackager().add(MmProgs.class);
        for (String g : List.of("writerNoFence", "writerFence", "reader", "pairWriter", "pairReader", "wordWriter",
                "wordReader", "sameAddrWriter", "sameAddrReader", "rqNoFence", "rq", "rqNoWriteback", "unaligned64")) {
            p.global(g, MmProgs.class, g);
        }
        return p.pack();
    }

    int pid;
    long arg;

    void boot(DpaConfig c) throws ImageRejected {
        start(c);
        pid = load(UID, image(), 1 << 16);
        arg = unit.heapBase(pid);
    }

    void run(String... entries) {
        int[] ts = new int[entries.length];
        for (int i = 0; i < entries.length; i++) {
            ts[i] = unit.threadCreate(pid, entries[i], arg, 0, Affinity.ANY, false);
            unit.threadRun(ts[i]);
        }
        for (int t : ts) {
            unit.trigger(t);
        }
        settle();
    }

    void reboot() {
        unit.close();
        assertEquals(List.of(), unit.leaks());
        unit = null;
    }

    // ---- C1 ----

    private void post(String entry, CheckMode mode) throws ImageRejected {
        start(DpaConfig.test(4, 1).withCheck(mode));
        byte[] img = OutboxTest.image();
        pid = load(UID, img, 1 << 16);
        arg = unit.heapBase(pid);
        poke(arg, unit.outboxCreate(pid));
        poke(arg + 8, 2);
        poke(arg + 40, arg + 4096);
        poke(arg + 48, 0x5eed);
        nic.own(QueueKind.SQ, 2, UID);
        nic.sqRings.put(2, new long[] {arg + 4096, 4});
        int t = unit.threadCreate(pid, entry, arg, 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
    }

    @Test
    void c1NicReadOfAWqeNotWrittenBackSeesOldBytesAndNamesTheLine() throws Exception {
        post("postNoWriteback", CheckMode.STRICT);
        assertEquals(List.of(0L), nic.fetched, "the NIC fetched the old bytes");
        Finding f = unit.findings().get(0);
        assertEquals("C1", f.check());
        assertTrue(f.site().startsWith(OutboxProgs.class.getName() + ".postNoWriteback:"), f.toString());
        assertTrue(f.message().contains("without __dpa_thread_memory_writeback") && f.message().contains("rung at "
                + OutboxProgs.class.getName() + ".sqRingDb:"), f.message());
        assertEquals(ProcessStatus.MEMORY_MODEL, unit.processStatus(pid));
    }

    @Test
    void c1IsSilentWithTheWriteback() throws Exception {
        post("post", CheckMode.STRICT);
        assertEquals(List.of(0x5eedL), nic.fetched);
        assertEquals(List.of(), unit.findings());
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
    }

    /** Open question 4 of DPA_MODEL.md §6: a fence does not write back for the NIC (S001: do not rely on it). */
    @Test
    void aFenceIsNoWriteback() throws Exception {
        post("postFenceOnly", CheckMode.WARN);
        assertEquals(List.of(0L), nic.fetched);
        assertEquals("C1", unit.findings().get(0).check());
        assertEquals(ProcessStatus.OK, unit.processStatus(pid), "warn mode reports and goes on");
    }

    @Test
    void offModeChecksNothingAndTheNicSeesEverything() throws Exception {
        post("postNoWriteback", CheckMode.OFF);
        assertEquals(List.of(0x5eedL), nic.fetched);
        assertEquals(List.of(), unit.findings());
    }

    // ---- C2 ----

    @Test
    void c2MessagePassingWithoutAWriteWriteFenceIsCaughtForEverySeed() throws Exception {
        for (long seed = 0; seed < 5; seed++) {
            boot(DpaConfig.test(4, seed).withCheck(CheckMode.WARN));
            run("writerNoFence", "reader");
            assertEquals(42, peek(arg + 128), "the interleaving happened to work (seed " + seed + ")");
            assertEquals(1, unit.findings().size(), "seed " + seed + ": " + unit.findings());
            Finding f = unit.findings().get(0);
            assertEquals("C2", f.check());
            assertTrue(f.site().startsWith(MmProgs.class.getName() + ".reader:"), f.toString());
            assertTrue(f.message().contains(MmProgs.class.getName() + ".writerNoFence:"), f.message());
            reboot();
        }
    }

    @Test
    void c2IsSilentWithTheFence() throws Exception {
        for (long seed = 0; seed < 5; seed++) {
            boot(DpaConfig.test(4, seed));
            run("writerFence", "reader");
            assertEquals(42, peek(arg + 128));
            assertEquals(List.of(), unit.findings(), "seed " + seed);
            assertEquals(ProcessStatus.OK, unit.processStatus(pid));
            reboot();
        }
    }

    @Test
    void theChecksHoldInConcurrentModeToo() throws Exception {
        for (int i = 0; i < 3; i++) {
            boot(DpaConfig.test(6, i).concurrent().withCheck(CheckMode.WARN));
            run("writerNoFence", "reader", "writerFence");
            assertEquals(42, peek(arg + 128));
            assertTrue(unit.findings().stream().anyMatch(f -> f.check().equals("C2")), unit.findings().toString());
            reboot();
            boot(DpaConfig.test(6, i).concurrent());
            run("writerFence", "reader");
            assertEquals(List.of(), unit.findings());
            reboot();
        }
    }

    @Test
    void strictModeEndsTheProcessOnC2() throws Exception {
        boot(DpaConfig.test(4, 3));
        run("writerNoFence", "reader");
        assertEquals(ProcessStatus.MEMORY_MODEL, unit.processStatus(pid));
        assertTrue(unit.crashData(pid).startsWith("C2"), unit.crashData(pid));
    }

    // ---- atomicity, same-address order, alignment ----

    @Test
    void eightByteStoresNeverTearSixteenByteCopiesDo() throws Exception {
        long torn16 = 0;
        for (long seed = 0; seed < 8; seed++) {
            boot(DpaConfig.test(4, seed).withCheck(CheckMode.OFF));
            run("wordWriter", "wordReader");
            assertEquals(0, peek(arg + 520), "an aligned 8-byte store is single-copy atomic (seed " + seed + ")");
            reboot();
            boot(DpaConfig.test(4, seed).withCheck(CheckMode.OFF));
            run("pairWriter", "pairReader");
            torn16 += peek(arg + 448);
            reboot();
        }
        assertTrue(torn16 > 0, "some seed tears a 16-byte copy between its two 8-byte halves");
    }

    @Test
    void sameAddressOrderIsKept() throws Exception {
        for (long seed = 0; seed < 8; seed++) {
            boot(DpaConfig.test(4, seed).withCheck(CheckMode.OFF));
            run("sameAddrWriter", "sameAddrReader");
            assertEquals(0, peek(arg + 584), "a reader never sees a location's stores out of order (seed " + seed + ")");
            reboot();
        }
    }

    @Test
    void c5AnUnalignedAccessIsFatalNamingTheLine() throws Exception {
        boot(DpaConfig.test(4, 1));
        run("unaligned64");
        assertEquals(ProcessStatus.UNALIGNED, unit.processStatus(pid));
        assertTrue(unit.crashData(pid).contains("unaligned 8-byte access") && unit.crashData(pid).contains(
                MmProgs.class.getName() + ".unaligned64:"), unit.crashData(pid));
    }

    // ---- C6 ----

    private List<Finding> rq(String entry) throws ImageRejected {
        boot(DpaConfig.test(4, 1).withCheck(CheckMode.WARN));
        run(entry);
        MemorySegment wqe = Arena.ofAuto().allocate(16);
        unit.nicFetchRq(arg + 320, arg + 256, wqe, 16);
        assertEquals(entry.equals("rqNoWriteback") ? 0 : 0xabc, wqe.get(DpaMemory.LONG, 0));
        return unit.findings();
    }

    @Test
    void c6ReceiveWqeAndDoorbellRecordOrder() throws Exception {
        List<Finding> f = rq("rqNoFence");
        assertEquals(1, f.size(), f.toString());
        assertEquals("C6", f.get(0).check());
        assertTrue(f.get(0).message().contains(MmProgs.class.getName() + ".rqNoFence:"), f.get(0).message());
        reboot();
        assertEquals("C1", rq("rqNoWriteback").get(0).check(), "the WQE was never written back");
        reboot();
        assertEquals(List.of(), rq("rq"));
    }
}
