package org.peerdirect.doca.dpa;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.flexio.FlexioCq;
import org.peerdirect.flexio.FlexioOutbox;
import org.peerdirect.flexio.FlexioProcess;

/**
 * {@code struct doca_dpa_completion}: a completion context of a DOCA DPA context. Completions of
 * the DOCA contexts attached to it ({@code doca_rdma_dpa_completion_attach}) arrive in it; a
 * completion arriving while notification is requested triggers the attached DPA thread, which
 * reads it ({@code doca_dpa_dev_get_completion}), acknowledges it and requests notification again
 * ({@link org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion}).
 *
 * <p>Underneath ([model], DPA_MODEL.md §2.5): a FlexIO CQ of element type DPA_THREAD bound to the
 * thread, its ring and doorbell record in the DPA heap, armed at start (FlexIO's
 * {@code flexio_cq_create} without {@code no_arm}: the first completion triggers the thread), an
 * outbox for the device calls' doorbells, and the descriptor the DPA handle names.
 *
 * <p>Order as in DOCA's samples: the thread started → {@link #create} → {@link #setThread} →
 * {@link #start} → (contexts attached) → {@code doca_dpa_thread_run}. A thread already run cannot
 * take a completion context (BAD_STATE), a started completion context cannot change its thread
 * (BAD_STATE), one with contexts attached cannot be stopped or destroyed (IN_USE).
 *
 * <p>The thread is optional: DOCA DPA Comms documents "manual polling — users may manually poll
 * the Completion Context without assigning it to a DPA Thread", and the samples' common
 * {@code dpa_completion_obj_init} calls {@code doca_dpa_completion_set_thread} only when it has a
 * thread, then {@code doca_dpa_completion_start} either way ({@code dpa_initiator_target}'s
 * initiator context has none). Without a thread the CQ is of element type NON_DPA_CQ and not
 * armed: nothing is triggered, a kernel or a thread reads it with {@code doca_dpa_dev_get_completion}.
 * [model] A {@code doca_dpa_dev_completion_request_notification} on it arms a CQ whose events go
 * to the host's EQ 0 and wake no DPA thread (DOCA does not say what it does there).
 *
 * <p>Not thread-safe, as DOCA documents; its DPA context's lock is taken for each call.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_completion_create, _set_thread, _start, _get_dpa_handle, _stop, _destroy</a>
 */
public final class DocaDpaCompletion {

    private enum State {
        CREATED, STARTED, STOPPED, DESTROYED
    }

    private final DocaDpa dpa;
    private final int queueSize;
    private final int logDepth;
    private State state = State.CREATED;
    private DocaDpaThread thread;
    private FlexioOutbox outbox;
    private FlexioCq cq;
    private long ring;
    private long dbr;
    private long desc;
    private long elems;
    /** Table entries written, and QPs of attached contexts still using the CQ; guarded by the DPA context's lock. */
    private int entries;
    /** The QP numbers of the table's entries, for {@code dpa:doca} (its thread's completion lines); guarded as {@link #entries}. */
    private final int[] qpns = new int[MAX_QPS];
    private int users;
    /** Async ops attached and started, for {@code dpa:doca}'s line of this context (read by its snapshot: copy-on-write). */
    private final java.util.List<DocaDpaAsyncOps> asyncOps = new java.util.concurrent.CopyOnWriteArrayList<>();

    private DocaDpaCompletion(DocaDpa dpa, int queueSize) {
        this.dpa = dpa;
        this.queueSize = queueSize;
        this.logDepth = Math.max(1, 32 - Integer.numberOfLeadingZeros(queueSize - 1));
    }

    /**
     * {@code doca_dpa_completion_create(dpa, queue_size)}: room for {@code queueSize} completions
     * not yet acknowledged (the CQ's depth is the next power of two).
     *
     * @throws DocaException INVALID_VALUE (null, a size below 1 or above 2^16), BAD_STATE (the context is not started)
     */
    public static DocaDpaCompletion create(DocaDpa dpa, int queueSize) {
        String w = "doca_dpa_completion_create";
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null DPA");
        DocaException.check(queueSize >= 1 && queueSize <= 1 << 16, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": queue size " + queueSize + " (1..65536)");
        DpaObjectLife.requireStarted(dpa, w);
        return new DocaDpaCompletion(dpa, queueSize);
    }

    /**
     * {@code doca_dpa_completion_set_thread}: the thread its completions trigger; before start.
     *
     * @throws DocaException BAD_STATE (started, or the thread already runs: attach before
     *         {@code doca_dpa_thread_run}), INVALID_VALUE (null, a thread of another DPA context)
     */
    public void setThread(DocaDpaThread t) {
        String w = "doca_dpa_completion_set_thread";
        check(w);
        DocaException.check(state == State.CREATED || state == State.STOPPED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the completion context is started");
        DocaException.check(t != null && t.dpa() == dpa, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": " + (t == null ? "null thread" : t + " is of another DPA context"));
        DocaException.check(!t.running(), DocaError.DOCA_ERROR_BAD_STATE, w + ": " + t + " runs already (attach completion contexts before doca_dpa_thread_run)");
        thread = t;
    }

    /**
     * {@code doca_dpa_completion_start}: the CQ with its ring in the DPA heap, bound to the thread
     * and armed; without a thread, a CQ only polled (see the class comment).
     *
     * @throws DocaException BAD_STATE (started, the thread not started or already run),
     *         NO_MEMORY, DRIVER (FlexIO refused the CQ)
     */
    public void start() {
        String w = "doca_dpa_completion_start";
        check(w);
        DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": started already");
        DocaException.check(thread == null || !thread.running(), DocaError.DOCA_ERROR_BAD_STATE,
                w + ": " + thread + " runs already (start before doca_dpa_thread_run)");
        DpaObjectLife.start(dpa, w, () -> {
            FlexioProcess p = dpa.process(w);
            if (thread != null) {
                thread.threadId(w); // BAD_STATE unless the thread is started
            }
            int depth = 1 << logDepth;
            ring = dpa.memAlloc(64L * depth);
            dbr = dpa.memAlloc(64);
            elems = dpa.memAlloc((long) ELEM_SIZE * depth);
            desc = dpa.memAlloc(DESC_SIZE);
            byte[] cqes = new byte[64 * depth];
            for (int i = 63; i < cqes.length; i += 64) {
                cqes[i] = (byte) 0xf1; // CQE_INVALID, owner 1: hardware's
            }
            dpa.h2dMemcpy(ring, cqes);
            dpa.memset(dbr, 0, 64);
            outbox = FlexioOutbox.create(p);
            if (thread != null) {
                cq = FlexioCq.create(p, new FlexioCq.Attr(logDepth, FlexioCq.ElementType.DPA_THREAD, thread.handler(), ring, dbr));
                thread.completionBound(1);
                thread.attachCompletion(this); // dpa:doca shows it under its thread
            } else { // polled only: a CQ of no DPA thread, not armed (FlexIO arms DPA_THREAD CQs only)
                cq = FlexioCq.create(p, new FlexioCq.Attr(logDepth, FlexioCq.ElementType.NON_DPA_CQ, null, ring, dbr));
            }
            ByteBuffer b = ByteBuffer.allocate(DESC_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(OFF_RING, ring).putLong(OFF_DBR, dbr).putLong(OFF_ELEMS, elems).putInt(OFF_CQN, cq.cqNum()).putInt(OFF_LOG, logDepth)
                    .putInt(OFF_OUTBOX, outbox.id());
            dpa.h2dMemcpy(desc, b.array());
            entries = 0;
            users = 0;
            state = State.STARTED;
        }, this::release);
    }

    /** {@code doca_dpa_completion_get_dpa_handle}: what the device calls take. BAD_STATE unless started. */
    public long getDpaHandle() {
        String w = "doca_dpa_completion_get_dpa_handle";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": not started");
        return desc;
    }

    /**
     * {@code doca_dpa_completion_stop}: the CQ and its memory go.
     *
     * @throws DocaException BAD_STATE (not started), IN_USE (contexts attached: stop them first)
     */
    public void stop() {
        String w = "doca_dpa_completion_stop";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": not started");
        dpa.lock.lock();
        try {
            DocaException.check(users == 0, DocaError.DOCA_ERROR_IN_USE, w + ": " + users + " queue(s) of attached contexts still use it (destroy them first)");
            release();
            state = State.STOPPED;
        } finally {
            dpa.lock.unlock();
        }
    }

    /** {@code doca_dpa_completion_destroy}: stops a started one first; INVALID_VALUE the second time, IN_USE while contexts use it. */
    public void destroy() {
        String w = "doca_dpa_completion_destroy";
        check(w);
        if (state == State.STARTED) {
            stop();
        }
        state = State.DESTROYED;
    }

    private void release() {
        assert dpa.lock.isHeldByCurrentThread();
        if (cq != null) {
            cq.destroy();
            cq = null;
            if (thread != null) {
                thread.completionBound(-1);
                thread.detachCompletion(this);
            }
        }
        if (outbox != null) {
            outbox.destroy();
            outbox = null;
        }
        boolean alive = dpa.started();
        for (long a : new long[] {ring, dbr, elems, desc}) {
            if (a != 0 && alive) {
                dpa.memFree(a);
            }
        }
        ring = dbr = elems = desc = 0;
    }

    private void check(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": destroyed already");
    }

    // ------------------------------------------------------------------ for the DOCA contexts attached (libdoca_rdma) [model]

    /**
     * The FlexIO CQ under the started completion context: the CQ an attached context's queues
     * report to. Not a DOCA call; libdoca_rdma's side of {@code doca_rdma_dpa_completion_attach} [model].
     */
    public FlexioCq flexioCq() {
        String w = "doca_dpa_completion (attach)";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the completion context is not started");
        return cq;
    }

    /** The DPA context it was created on. */
    public DocaDpa dpa() {
        return dpa;
    }

    /**
     * Records that QP {@code qpn} reports here with {@code userData} (its connection id), so the
     * device's elements carry it [model]. NO_MEMORY past {@link org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion#MAX_QPS}.
     */
    public void attachQp(int qpn, int userData) {
        attachQp(qpn, userData, 0);
    }

    /**
     * As {@link #attachQp(int, int)}; the device stores the QP's send index after each completion it
     * hands out at DPA address {@code sqCiDaddr} (0: none), where async ops count their copies in flight [model].
     */
    void attachQp(int qpn, int userData, long sqCiDaddr) {
        String w = "doca_dpa_completion (attach)";
        dpa.lock.lock();
        try {
            flexioCq();
            DocaException.check(entries < MAX_QPS, DocaError.DOCA_ERROR_NO_MEMORY, w + ": " + MAX_QPS + " queues attached already");
            dpa.h2dMemcpy(desc + OFF_TABLE + 8L * entries, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(qpn).putInt(userData).array());
            dpa.h2dMemcpy(desc + OFF_CI_TABLE + 8L * entries, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(sqCiDaddr).array());
            qpns[entries++] = qpn;
            users++;
            dpa.h2dMemcpy(desc + OFF_NQPS, ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(entries).array());
        } finally {
            dpa.lock.unlock();
        }
    }

    /** The QP's queues were destroyed: one user fewer (the table keeps its entry until stop). */
    public void detachQp() {
        dpa.lock.lock();
        try {
            users = Math.max(0, users - 1);
        } finally {
            dpa.lock.unlock();
        }
    }

    /** Async ops started on this context ({@code true}) or stopped ({@code false}): shown in its line. */
    void asyncOps(DocaDpaAsyncOps ops, boolean started) {
        if (started) {
            asyncOps.add(ops);
        } else {
            asyncOps.remove(ops);
        }
    }

    /** Its queue size as created. */
    public int queueSize() {
        return queueSize;
    }

    @Override
    public String toString() {
        StringBuilder qps = new StringBuilder();
        for (int i = 0; i < entries; i++) { // DOCA RDMA connections' and DOCA verbs QPs
            qps.append(i == 0 ? ", qps" : "").append(" 0x").append(Integer.toHexString(qpns[i]));
        }
        return "doca_dpa_completion " + (cq == null ? "" : "cq 0x" + Integer.toHexString(cq.cqNum()) + " ") + state.name().toLowerCase()
                + (thread == null ? "" : ", thread " + thread) + qps + asyncOps.stream().map(o -> ", " + o).collect(java.util.stream.Collectors.joining());
    }
}
