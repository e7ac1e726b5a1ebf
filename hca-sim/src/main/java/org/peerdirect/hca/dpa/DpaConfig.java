package org.peerdirect.hca.dpa;

import java.time.Duration;

/**
 * The DPA subsystem's configuration.
 *
 * @param memBytes on-card DPA memory (BF-3 samples allocate a 256 MiB heap; tests use little)
 * @param eus execution units in the partition (256 on BF-3; tests use few)
 * @param reservedEus EUs the DPA OS keeps (2 on BF-3: ids 0 and 1)
 * @param deterministic one hart at a time under a seeded scheduler (unit tests) instead of
 *        virtual threads on the carriers
 * @param seed the deterministic scheduler's seed (the same seed replays the same interleaving)
 * @param check the memory-model checker's mode
 * @param watchdogCycles virtual cycles one activation may run before the watchdog ends the process
 * @param budget ISA calls between carrier yields in concurrent mode (busy-wait handlers on 2 cores)
 * @param stalePolls hits on one window line after which C4 compares it with host memory
 * @param strictIsolation a doorbell on a foreign queue ends the process (else it is dropped and counted)
 * @param wallTimeout how long the host waits for the DPA to settle or a process to stop
 * @param wallWatchdog concurrent mode: how long an activation may run in wall-clock time without an
 *        ISA call (a Java loop the verifier's heuristic let through) before the wall-clock watchdog
 *        ends its process and the DPA OS takes its EU back ({@link WallWatchdog})
 * @param elidePolls concurrent mode: a hart polling DPA memory nothing wrote waits for a write
 *        instead of spinning on a carrier ({@link PollWaits}; off only to measure what it saves)
 */
public record DpaConfig(long memBytes, int eus, int reservedEus, boolean deterministic, long seed, CheckMode check,
        long watchdogCycles, int budget, int stalePolls, boolean strictIsolation, Duration wallTimeout, Duration wallWatchdog, boolean elidePolls) {

    public DpaConfig {
        if (memBytes < 1 << 16 || memBytes > 1L << 34) {
            throw new IllegalArgumentException("DPA memory " + memBytes + " bytes: 64 KiB .. 16 GiB");
        }
        if (eus <= reservedEus || eus > 256 || reservedEus < 0) {
            throw new IllegalArgumentException("EUs " + eus + " with " + reservedEus + " reserved: 1..256 user EUs");
        }
    }

    /** A configuration whose harts wait out polls of unchanged memory ({@link #elidePolls}). */
    public DpaConfig(long memBytes, int eus, int reservedEus, boolean deterministic, long seed, CheckMode check,
            long watchdogCycles, int budget, int stalePolls, boolean strictIsolation, Duration wallTimeout, Duration wallWatchdog) {
        this(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls, strictIsolation,
                wallTimeout, wallWatchdog, true);
    }

    /** BlueField-3: 256 MiB, 256 EUs of which 2 reserved, concurrent, strict checks, 120 s watchdog (1.8 GHz). */
    public static DpaConfig bluefield3() {
        return new DpaConfig(256L << 20, 256, 2, false, 0, CheckMode.STRICT, 120L * 1_800_000_000L, 256, 64, true,
                Duration.ofSeconds(30), Duration.ofSeconds(10));
    }

    /** Unit tests: 4 MiB, {@code eus} EUs (2 reserved), deterministic with {@code seed}, strict. */
    public static DpaConfig test(int eus, long seed) {
        return new DpaConfig(4L << 20, eus, 2, true, seed, CheckMode.STRICT, 1_000_000, 256, 64, true,
                Duration.ofSeconds(120), Duration.ofSeconds(30)); // generous: CI's 2 cores are shared with the whole suite
    }

    public DpaConfig withCheck(CheckMode c) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, c, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls);
    }

    public DpaConfig withWatchdog(long cycles) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, cycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls);
    }

    public DpaConfig concurrent() {
        return new DpaConfig(memBytes, eus, reservedEus, false, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls);
    }

    /** The wall-clock watchdog's limit ({@link #wallWatchdog}). */
    public DpaConfig withWallWatchdog(Duration limit) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, limit, elidePolls);
    }

    public DpaConfig withIsolation(boolean strict) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strict, wallTimeout, wallWatchdog, elidePolls);
    }

    /** Polls of unchanged DPA memory spin ({@code false}) or wait for a write ({@code true}, the default). */
    public DpaConfig withElidePolls(boolean elide) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elide);
    }
}
