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
 * @param pollSpin concurrent mode with {@code elidePolls}: how long a hart whose last wait was ended
 *        by a write first spins on the write count, keeping its carrier, before it parks
 *        ({@link PollWaits#spin}); zero: it parks at once. Bounded twice: one spin per quiet row, and
 *        none after a wait that ended by its bound, so an idle poller burns no carrier
 */
public record DpaConfig(long memBytes, int eus, int reservedEus, boolean deterministic, long seed, CheckMode check,
        long watchdogCycles, int budget, int stalePolls, boolean strictIsolation, Duration wallTimeout, Duration wallWatchdog, boolean elidePolls,
        Duration pollSpin) {

    /**
     * The model's default {@link #pollSpin}; the system property {@value #POLL_SPIN_PROPERTY}
     * (nanoseconds) overrides it for an A/B run of benches whose rigs make their own devices.
     */
    public static final Duration DEFAULT_POLL_SPIN = Duration.ZERO;
    public static final String POLL_SPIN_PROPERTY = "peerdirect.dpa.pollSpinNanos";

    public DpaConfig {
        if (memBytes < 1 << 16 || memBytes > 1L << 34) {
            throw new IllegalArgumentException("DPA memory " + memBytes + " bytes: 64 KiB .. 16 GiB");
        }
        if (eus <= reservedEus || eus > 256 || reservedEus < 0) {
            throw new IllegalArgumentException("EUs " + eus + " with " + reservedEus + " reserved: 1..256 user EUs");
        }
        if (pollSpin.isNegative() || pollSpin.compareTo(Duration.ofMillis(10)) > 0) {
            throw new IllegalArgumentException("poll spin " + pollSpin + ": 0 .. 10 ms (a spin is a core burned)");
        }
    }

    /** A configuration with the default {@link #pollSpin}. */
    public DpaConfig(long memBytes, int eus, int reservedEus, boolean deterministic, long seed, CheckMode check,
            long watchdogCycles, int budget, int stalePolls, boolean strictIsolation, Duration wallTimeout, Duration wallWatchdog,
            boolean elidePolls) {
        this(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls, strictIsolation,
                wallTimeout, wallWatchdog, elidePolls, defaultPollSpin());
    }

    /** {@link #DEFAULT_POLL_SPIN}, or the nanoseconds of {@value #POLL_SPIN_PROPERTY} when set. */
    static Duration defaultPollSpin() {
        Long n = Long.getLong(POLL_SPIN_PROPERTY);
        return n == null ? DEFAULT_POLL_SPIN : Duration.ofNanos(n);
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
                strictIsolation, wallTimeout, wallWatchdog, elidePolls, pollSpin);
    }

    public DpaConfig withWatchdog(long cycles) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, cycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls, pollSpin);
    }

    public DpaConfig concurrent() {
        return new DpaConfig(memBytes, eus, reservedEus, false, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls, pollSpin);
    }

    /** The wall-clock watchdog's limit ({@link #wallWatchdog}). */
    public DpaConfig withWallWatchdog(Duration limit) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, limit, elidePolls, pollSpin);
    }

    public DpaConfig withIsolation(boolean strict) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strict, wallTimeout, wallWatchdog, elidePolls, pollSpin);
    }

    /** Polls of unchanged DPA memory spin ({@code false}) or wait for a write ({@code true}, the default). */
    public DpaConfig withElidePolls(boolean elide) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elide, pollSpin);
    }

    /** How long a hart with flowing traffic spins before it parks ({@link #pollSpin}). */
    public DpaConfig withPollSpin(Duration spin) {
        return new DpaConfig(memBytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls, spin);
    }

    /** This configuration with {@code bytes} of DPA memory. */
    public DpaConfig withMemBytes(long bytes) {
        return new DpaConfig(bytes, eus, reservedEus, deterministic, seed, check, watchdogCycles, budget, stalePolls,
                strictIsolation, wallTimeout, wallWatchdog, elidePolls, pollSpin);
    }
}
