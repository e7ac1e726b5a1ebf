package org.peerdirect.doca.dpa;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * {@code struct doca_dpa_tg}: a fixed number of DPA threads that form one team, each with its rank
 * ({@code doca_dpa_thread_group_create(dpa, num_threads)}, {@code _set_thread(tg, thread, rank)},
 * {@code _start}, {@code _get_num_threads}, {@code _stop}, {@code _destroy}). On the device a member
 * thread's {@code doca_dpa_dev_thread_rank()} is its rank and {@code doca_dpa_dev_num_threads()} the
 * group's size ({@code doca_dpa_dev.h}: "the number of threads in thread group running the
 * kernel"); the runtime's block of each member carries them ({@code DocaDpaDev}).
 *
 * <p>Order, as the users of DOCA 3.x do it: create → for each rank: thread create, set_func_arg,
 * {@link #setThread}, thread start → {@link #start} → attach completions → thread run. A member's
 * rank is given before its thread starts (BAD_STATE after, as every thread attribute);
 * {@link #start} needs every rank given and every member started (BAD_STATE naming what is
 * missing); a member runs only once its group started (BAD_STATE). DOCA gives a group no EU
 * affinity of its own: each member may be pinned with {@code doca_dpa_thread_set_affinity}, and
 * the silicon's EU groups (the firmware's partition configuration, {@code dpaeumgmt}) are not
 * reachable from a user's DOCA calls.
 *
 * <p>Not thread-safe, as DOCA documents; each call takes its context's lock.
 */
public final class DocaDpaThreadGroup {

    private enum State {
        CREATED, STARTED, STOPPED, DESTROYED
    }

    private final DocaDpa dpa;
    private final DocaDpaThread[] members;
    private State state = State.CREATED;

    private DocaDpaThreadGroup(DocaDpa dpa, int numThreads) {
        this.dpa = dpa;
        this.members = new DocaDpaThread[numThreads];
    }

    /**
     * {@code doca_dpa_thread_group_create}: a group of {@code numThreads} ranks.
     *
     * @throws DocaException INVALID_VALUE (null, fewer than 1 thread, more than a process may have),
     *         BAD_STATE (the context is not started)
     */
    public static DocaDpaThreadGroup create(DocaDpa dpa, int numThreads) {
        String w = "doca_dpa_thread_group_create";
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null DPA");
        int max = dpa.caps(w).maxThreadsPerProcess();
        DocaException.check(numThreads >= 1 && numThreads <= max, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + numThreads + " threads (1.." + max + ", the DPA threads a process may have)");
        DpaObjectLife.requireStarted(dpa, w);
        return new DocaDpaThreadGroup(dpa, numThreads);
    }

    /**
     * {@code doca_dpa_thread_group_set_thread}: {@code thread} is rank {@code rank}.
     *
     * @throws DocaException INVALID_VALUE (null, a rank outside {@code [0, num_threads)}, a thread
     *         of another DPA context), ALREADY_EXIST (the rank is taken, or the thread has a rank),
     *         BAD_STATE (the group started, or the thread did)
     */
    public void setThread(DocaDpaThread thread, int rank) {
        String w = "doca_dpa_thread_group_set_thread";
        check(w);
        DocaException.check(state == State.CREATED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the group is " + name() + " (before doca_dpa_thread_group_start only)");
        DocaException.check(thread != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null thread");
        DocaException.check(thread.dpa() == dpa, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the thread is of another DPA context");
        DocaException.check(rank >= 0 && rank < members.length, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": rank " + rank + " outside 0.." + (members.length - 1));
        DocaException.check(members[rank] == null, DocaError.DOCA_ERROR_ALREADY_EXIST, w + ": rank " + rank + " is " + members[rank] + " already");
        thread.joinGroup(w, this, rank);
        members[rank] = thread;
    }

    /** {@code doca_dpa_thread_group_get_num_threads}. */
    public int getNumThreads() {
        check("doca_dpa_thread_group_get_num_threads");
        return members.length;
    }

    int numThreads() {
        return members.length;
    }

    boolean isStarted() {
        return state == State.STARTED;
    }

    /**
     * {@code doca_dpa_thread_group_start}: every rank has its thread, and every member is started.
     *
     * @throws DocaException BAD_STATE (started, a rank without a thread, a member not started)
     */
    public void start() {
        String w = "doca_dpa_thread_group_start";
        check(w);
        DocaException.check(state == State.CREATED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the group is " + name());
        List<Integer> missing = new ArrayList<>();
        List<Integer> notStarted = new ArrayList<>();
        for (int r = 0; r < members.length; r++) {
            if (members[r] == null) {
                missing.add(r);
            } else if (!members[r].started()) {
                notStarted.add(r);
            }
        }
        DocaException.check(missing.isEmpty(), DocaError.DOCA_ERROR_BAD_STATE, w + ": no thread for rank(s) " + missing + " (doca_dpa_thread_group_set_thread)");
        DocaException.check(notStarted.isEmpty(), DocaError.DOCA_ERROR_BAD_STATE,
                w + ": the thread(s) of rank(s) " + notStarted + " are not started (doca_dpa_thread_start first)");
        state = State.STARTED;
    }

    /** {@code doca_dpa_thread_group_stop}: members not run yet may no longer run; those running stay (stop them one by one). */
    public void stop() {
        String w = "doca_dpa_thread_group_stop";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the group is " + name());
        state = State.STOPPED;
    }

    /**
     * {@code doca_dpa_thread_group_destroy}; the member threads stay (destroy them one by one).
     *
     * @throws DocaException BAD_STATE while started (stop first), INVALID_VALUE the second time
     */
    public void destroy() {
        String w = "doca_dpa_thread_group_destroy";
        check(w);
        DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the group is started (doca_dpa_thread_group_stop first)");
        state = State.DESTROYED;
    }

    private void check(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the group was destroyed");
    }

    private String name() {
        return state.name().toLowerCase();
    }

    @Override
    public String toString() {
        return "doca_dpa_tg of " + members.length + " (" + name() + "): " + Arrays.toString(members);
    }
}
