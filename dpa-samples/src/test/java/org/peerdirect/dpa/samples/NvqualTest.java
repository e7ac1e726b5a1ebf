package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.dpa.DpaLabFixture;
import org.peerdirect.dpa.samples.dev.NvqualDevStubs;

/**
 * DPA_MODEL.md §4 scenario 10, EU qualification (DOCA's {@code dpa_nvqual}): one thread per
 * available EU of the BlueField-3 with strict affinity and local storage, triggered by notification
 * completions from one RPC, memory and arithmetic kernels, each adding 1 to a sync event the host
 * waits on; the user's excluded EUs are not used; each thread's virtual cycles are reported.
 * The mutant (a memory kernel that does not write its result back before the host's d2h copy)
 * must fail the qualification, and the checker names it (C1). (doca-dpa's {@code DocaDpaNvqualTest}
 * until the program moved beside its sample, {@code dpa:sample nvqual}, which itest runs too.)
 */
class NvqualTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(120);

    NvqualTest() {
        super(NvqualDevStubs.APP);
    }

    @Test
    void everyAvailableEuQualifiesButTheExcluded() {
        Set<Integer> excluded = Set.of(5, 17, 200);
        NvqualSample.Report r = NvqualSample.run(dpa, dev, excluded, NvqualDevStubs.DPA_NVQUAL_MEMORY_STRESS_KERNEL, 8, 50, BOUND);
        System.out.println(r.json(dev.name()));
        assertEquals(List.of(), r.failures());
        assertEquals(256, r.totalHarts());
        assertEquals(IntStream.range(2, 256).boxed().toList(), r.available(), "every EU but the DPA OS's (0 and 1)");
        assertEquals(List.of(1), r.unreachable());
        assertEquals(List.of(5, 17, 200), r.unused());
        assertEquals(251, r.used().size());
        assertTrue(r.used().stream().noneMatch(excluded::contains), "no excluded EU used");
        assertEquals(Set.copyOf(r.used()), r.cycles().keySet(), "a result from every used EU");
        assertTrue(r.cycles().values().stream().allMatch(c -> c > 0), "virtual cycles counted on each EU: " + r.cycles());
        long memoryEus = r.used().stream().filter(eu -> eu % 16 < 3).count();
        assertEquals(16 * 3 - 2 - 1, memoryEus, "3 memory EUs per core, less EUs 0 and 1 and the excluded 17");
    }

    @Test
    void theMutantWithoutWritebackFailsAndTheCheckerNamesIt() {
        Set<Integer> excluded = IntStream.range(0, 256).filter(eu -> eu != 2 && eu != 3 && eu != 16).boxed().collect(Collectors.toSet());
        NvqualSample.Report r = NvqualSample.run(dpa, dev, excluded, NvqualDevStubs.MEMORY_STRESS_NO_WRITEBACK, 8, 50, Duration.ofSeconds(30));
        assertEquals(List.of(2, 3, 16), r.used());
        assertFalse(r.failures().isEmpty(), "the qualification must fail: " + r);
        List<String> findings = lab.dpaFindings(0);
        assertTrue(findings.stream().anyMatch(f -> f.contains("C1") && f.contains("NvqualDev.report:")), "C1 names the store that was not written back: " + findings);
    }
}
