package org.peerdirect.hca.dpaview;

import java.util.List;
import java.util.Map;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The BlueField-3 DPAs of the model, read-only: one service for all of them (the silicon's side
 * publishes it; a console reads it). Every method takes a snapshot under the DPA RTOS's lock and
 * returns values, never live objects; a function removed meanwhile answers as absent.
 */
@ProviderType
public interface DpaView {

    /**
     * One execution unit (hart) that ran at least one activation.
     *
     * @param eu its number ({@code 0..reserved-1} are the RTOS's own)
     * @param busy whether an activation holds it now
     * @param activations activations it ran
     * @param cycles cycles it spent
     * @param instret instructions it retired
     */
    record Eu(int eu, boolean busy, long activations, long cycles, long instret) {
    }

    /**
     * A DPA process ({@code DPA_PROCESS} general object).
     *
     * @param status {@code 0} while it runs; the first error or {@code PROCESS_FINISH} once it ended
     * @param crash what ended it, "" when nothing did
     */
    record Process(int id, int uid, int pd, int status, long heapBase, long heapSize, int threads, String crash) {
    }

    /**
     * A CQ bound to a DPA thread: whether it is armed (a CQE starts an activation) and its
     * producer and consumer index. {@code armed} is false for a CQ the NIC no longer knows.
     */
    record Cq(int cqn, boolean known, boolean armed, long producerIndex, long consumerIndex) {
    }

    /**
     * A DPA thread ({@code DPA_THREAD} general object).
     *
     * @param state the RTOS's state ({@code CREATED}, {@code WAITING}, {@code RUNNABLE}, {@code RUNNING}, ...)
     * @param eu the EU it runs on now, -1 when it runs on none
     * @param activations activations it was granted an EU for
     * @param triggersLatched triggers (host DUAR or CQE) that came while it ran and were kept for one more activation
     * @param triggersIgnored triggers dropped (finished, one latched already, process ended)
     */
    record Thread(int id, int process, String entry, String state, int eu, long activations, long triggersLatched,
            long triggersIgnored, List<Cq> cqs) {
    }

    /**
     * One DPA as it is now; {@code running} false when no DPA object was created yet (the other
     * lists are then empty).
     */
    record Dpa(String bdf, boolean running, int eusTotal, int eusReserved, int eusBusy, List<Eu> eus, List<Process> processes,
            List<Thread> threads) {
    }

    /** The PCI functions ({@code 0000:07:00.0}) of the BlueField-3s plugged in now, in order. */
    List<String> functions();

    /**
     * The DPA capability block ({@code dpa_capabilities}) of function {@code bdf}, field name to
     * value in the block's order; empty when the function is not powered.
     *
     * @throws IllegalArgumentException when {@code bdf} is no BlueField-3 plugged in now
     */
    Map<String, Long> caps(String bdf);

    /**
     * The DPA of function {@code bdf} now.
     *
     * @throws IllegalArgumentException when {@code bdf} is no BlueField-3 plugged in now
     */
    Dpa dpa(String bdf);
}
