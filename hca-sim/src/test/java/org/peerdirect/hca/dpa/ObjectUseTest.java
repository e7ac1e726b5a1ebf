package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpa.progs.ObjectProgs;

/**
 * Check C8 (two harts inside one non-thread-safe object at once) at the ISA: the holder stays in
 * its object until the intruder has been in its own, so with one object the overlap is forced for
 * every seed (no timing). Mutant: both threads on one object → C8 naming both call sites (strict
 * ends the process, warn counts it and both run to their end); the same program with one object
 * per thread is silent, as is an object entered after its holder's activation ended inside it.
 */
class ObjectUseTest extends DpaRig {

    static final long OBJ_A = 0x40, OBJ_B = 0x80;
    int pid;
    long arg;

    void boot(DpaConfig c, long holderObj, long intruderObj) throws ImageRejected {
        start(c);
        ImagePackager p = new ImagePackager().add(ObjectProgs.class);
        for (String g : List.of("holder", "intruder", "unwinder", "late", "cost")) {
            p.global(g, ObjectProgs.class, g);
        }
        pid = load(UID, p.pack(), 1 << 16);
        arg = unit.heapBase(pid);
        poke(arg, arg + 256 + holderObj); // objects are opaque DPA addresses of the process
        poke(arg + 8, arg + 256 + intruderObj);
    }

    int[] run(String... entries) {
        int[] ts = new int[entries.length];
        for (int i = 0; i < entries.length; i++) {
            ts[i] = unit.threadCreate(pid, entries[i], arg, 0, Affinity.ANY, false);
            unit.threadRun(ts[i]);
        }
        for (int t : ts) {
            unit.trigger(t);
        }
        settle();
        return ts;
    }

    void reboot() {
        unit.close();
        assertEquals(List.of(), unit.leaks());
        unit = null;
    }

    @Test
    void twoHartsInOneObjectIsC8NamingBothCallSitesForEverySeed() throws Exception {
        for (long seed = 0; seed < 5; seed++) {
            boot(DpaConfig.test(4, seed), OBJ_A, OBJ_A);
            run("holder", "intruder");
            assertEquals(ProcessStatus.MEMORY_MODEL, unit.processStatus(pid), "seed " + seed + ": strict ends the process");
            String crash = unit.crashData(pid);
            assertTrue(crash.startsWith("C8"), crash);
            assertTrue(crash.contains(ObjectProgs.class.getName() + ".intruder:"), "the entering call site: " + crash);
            assertTrue(crash.contains(ObjectProgs.class.getName() + ".holder:"), "the holder's call site: " + crash);
            assertTrue(crash.contains("0x" + Long.toHexString(arg + 256 + OBJ_A)), "the object: " + crash);
            assertEquals(0, peek(arg + 192), "seed " + seed + ": the holder did not get past the finding");
            reboot();
        }
    }

    @Test
    void warnCountsC8AndBothHartsRunToTheirEnd() throws Exception {
        for (long seed = 0; seed < 3; seed++) {
            boot(DpaConfig.test(4, seed).withCheck(CheckMode.WARN), OBJ_A, OBJ_A);
            int[] ts = run("holder", "intruder");
            assertTrue(unit.describeThread(ts[1]).endsWith(" C8 findings 1"), "dpa:threads: " + unit.describeThread(ts[1]));
            assertTrue(!unit.describeThread(ts[0]).contains("C8"), "the holder was not the one entering: " + unit.describeThread(ts[0]));
            assertEquals(ProcessStatus.OK, unit.processStatus(pid));
            assertEquals(1, peek(arg + 192), "seed " + seed + ": the holder ended");
            assertEquals(List.of("C8"), unit.findings().stream().map(Finding::check).toList(), unit.findings().toString());
            assertTrue(unit.findings().get(0).site().startsWith(ObjectProgs.class.getName() + ".intruder:"), unit.findings().toString());
            assertTrue(unit.describeFindings().stream().anyMatch(l -> l.contains("C8") && l.contains("intruder")), unit.describeFindings().toString());
            reboot();
        }
    }

    @Test
    void oneObjectPerHartIsSilent() throws Exception {
        for (long seed = 0; seed < 5; seed++) {
            boot(DpaConfig.test(4, seed), OBJ_A, OBJ_B);
            run("holder", "intruder");
            assertEquals(ProcessStatus.OK, unit.processStatus(pid), unit.crashData(pid));
            assertEquals(1, peek(arg + 192));
            assertEquals(List.of(), unit.findings());
            reboot();
        }
    }

    @Test
    void anActivationEndingInsideAnObjectLeavesItFree() throws Exception {
        for (long seed = 0; seed < 3; seed++) {
            boot(DpaConfig.test(4, seed), OBJ_A, OBJ_A);
            run("unwinder");
            run("late");
            assertEquals(ProcessStatus.OK, unit.processStatus(pid), unit.crashData(pid));
            assertEquals(1, peek(arg + 192));
            assertEquals(List.of(), unit.findings());
            reboot();
        }
    }

    @Test
    void offChecksNothingAndTheAnnotationsRetireNoInstruction() throws Exception {
        boot(DpaConfig.test(4, 1).withCheck(CheckMode.OFF), OBJ_A, OBJ_A);
        run("holder", "intruder", "cost");
        assertEquals(ProcessStatus.OK, unit.processStatus(pid));
        assertEquals(1, peek(arg + 192));
        assertEquals(List.of(), unit.findings());
        assertEquals(1, peek(arg + 320), "instRet itself only");
        reboot();
        boot(DpaConfig.test(4, 1), OBJ_A, OBJ_B);
        run("cost");
        assertEquals(1, peek(arg + 320), "checked: still no instruction");
    }

    @Test
    void concurrentModeCatchesTheForcedOverlapToo() throws Exception {
        boot(DpaConfig.test(6, 1).concurrent().withCheck(CheckMode.WARN), OBJ_A, OBJ_A);
        run("holder", "intruder");
        assertEquals(List.of("C8"), unit.findings().stream().map(Finding::check).toList(), unit.findings().toString());
        reboot();
        boot(DpaConfig.test(6, 1).concurrent(), OBJ_A, OBJ_B);
        run("holder", "intruder");
        assertEquals(List.of(), unit.findings());
    }
}
