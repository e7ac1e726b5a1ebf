package org.peerdirect.doca.dpa;

import java.util.List;

/**
 * The live DOCA DPA objects of every user process, as a service of the doca-dpa bundle
 * ({@code dpa:doca} reads it). DOCA's objects live in the user's process (the host library's
 * state, not the firmware's: {@code dpa:ps} shows the DPA processes and threads the firmware runs
 * for them); the library keeps each context from {@code doca_dpa_create} to {@code doca_dpa_destroy}
 * in one registry per JVM, listed here by the process it belongs to. A snapshot: each context is
 * read under its own lock, so one context's view is consistent, the list as a whole is not.
 */
public interface DocaDpaObjects {

    /** The live DPA contexts of every process, by pid, then creation order. */
    List<Context> contexts();

    /**
     * One {@code doca_dpa}: its process ({@code pid}, name), device, app, state ({@code created},
     * {@code started}, {@code stopped}), the FlexIO process it started ({@code dpa:ps}'s process id;
     * -1 when not started), its threads, the sync events with a DPA location on it, its kernel launches.
     */
    record Context(int pid, String process, String device, String app, String state, int flexioProcess, List<Thread> threads,
            List<Event> events, Kernels kernels) {
    }

    /**
     * One {@code doca_dpa_thread}: its function and argument, state, EU ({@code -1}: no affinity),
     * activations so far (the firmware's count; -1 when it cannot be read, 0 unless started), and
     * what triggers it: its notification completions and completion contexts, each one line.
     */
    record Thread(String func, long arg, String state, int eu, int activations, List<String> completions) {
    }

    /**
     * One {@code doca_sync_event}: {@code description} its id, state, publisher and subscriber
     * locations; {@code value} read now (unsigned), or why it cannot be ({@code "-"} when not started).
     */
    record Event(String description, String value) {
    }

    /**
     * Kernel launches of the context: launched, started (wait event passed), finished (every rank
     * ended; counted before the completion event moves, so whoever saw the event sees the count),
     * pending (launched, not finished); the last launch and the last finished as one
     * line each (kernel, threads, wait event and threshold, completion event, value, set or add);
     * the first failure or null.
     */
    record Kernels(long launched, long started, long finished, int pending, String lastLaunched, String lastFinished, String failure) {
    }
}
