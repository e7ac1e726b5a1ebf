package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.dpa.samples.AllToAllSample.RANKS;
import static org.peerdirect.dpa.samples.dev.AllToAllDev.MUTANT_SIGNAL_BEFORE_WRITE;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DpaLab;

/**
 * DPA_MODEL.md §4 scenario 9, DOCA's {@code dpa_all_to_all} application with its MPI ranks as
 * objects of one JVM ({@link AllToAllSample.World}): 4 ranks, each a DPA context of its own, over
 * two BlueField-3s (rank r on {@code mlx5_<r % 2>}: every rank has peers on its own device and on
 * the other). Each iteration the send matrices hold new bytes; every rank's receive matrix must be
 * exactly the transpose, and every event the sequence number. (doca-rdma's {@code DpaAllToAllTest}
 * until its program moved beside the sample, {@code dpa:sample all_to_all}, which itest runs too.)
 */
class AllToAllTest {

    static final int DEVICES = 2;
    static final int ITERATIONS = 5;

    @TempDir
    Path tmp;
    private DpaLab lab;
    private final List<DocaDev> devs = new ArrayList<>();
    private AllToAllSample.World world;

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp, DEVICES);
        for (int d = 0; d < DEVICES; d++) {
            devs.add(lab.open(d));
        }
    }

    @AfterEach
    void down() {
        if (world != null) {
            world.close();
        }
        for (int d = 0; d < DEVICES; d++) {
            int dev = d;
            assertEquals(List.of(), lab.dpa(d).stream().filter(l -> !l.startsWith("eu")).toList(), "mlx5_" + dev + ": no DPA process left");
        }
        devs.forEach(DocaDev::close);
        lab.close();
    }

    private String ps() {
        List<String> all = new ArrayList<>();
        for (int d = 0; d < DEVICES; d++) {
            all.addAll(lab.dpa(d));
        }
        return String.join("\n", all);
    }

    @Test
    void theReceiveMatricesAreTheTransposeEveryIteration() {
        world = new AllToAllSample.World(devs, RANKS);
        for (long seq = 1; seq <= ITERATIONS; seq++) {
            world.allToAll(seq, 0);
            assertEquals(List.of(), world.wrongBlocks(seq), "iteration " + seq + ": every receive block is its sender's block for this rank");
            for (AllToAllSample.Rank a : world.ranks) {
                assertEquals(seq, a.done.get(), "rank " + a.me + ": the kernel's completion event set to the sequence number");
                for (int i = 0; i < RANKS; i++) {
                    if (i != a.me) {
                        assertEquals(seq, a.events[i].get(), "rank " + a.me + ": rank " + i + " signalled " + seq + " through RDMA");
                    }
                }
            }
        }
        String ps = ps();
        assertTrue(!ps.contains("C1") && !ps.contains("C2") && !ps.contains("C3") && !ps.contains("C7"), "no memory-model finding: " + ps);
    }

    /**
     * The mutant: each write posted after the signal that was meant to follow it, and not
     * flushed (the signal's doorbell came before it). The peers' events still reach the sequence
     * number, so every kernel ends; but no block crossed a connection: only the diagonal (each
     * rank's own block, copied on the DPA) is right.
     */
    @Test
    void aSignalBeforeItsWriteIsCaughtAsWrongData() {
        world = new AllToAllSample.World(devs, RANKS);
        world.allToAll(1, MUTANT_SIGNAL_BEFORE_WRITE);
        List<String> wrong = world.wrongBlocks(1);
        assertNotEquals(List.of(), wrong, "the mutant's receive matrices are not the transpose");
        List<String> offDiagonal = new ArrayList<>();
        for (int r = 0; r < RANKS; r++) {
            for (int i = 0; i < RANKS; i++) {
                if (r != i) {
                    offDiagonal.add(r + "<-" + i);
                }
            }
        }
        assertEquals(offDiagonal, wrong, "every block that had to cross a connection is wrong, the diagonal is right");
    }
}
