package org.peerdirect.doca.dpa;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevAsyncOps.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.flexio.FlexioCq;
import org.peerdirect.flexio.FlexioOutbox;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioQp;

/**
 * {@code struct doca_dpa_async_ops}: lets a DPA thread issue asynchronous copies
 * ({@code doca_dpa_dev_post_memcpy}, {@link org.peerdirect.doca.dpa.dev.DocaDpaDevAsyncOps}) whose
 * completions arrive on the completion context it is attached to, carrying its user data.
 *
 * <p>Order as DOCA's users write it: {@link #create} (the DPA context started) → {@link #attach}
 * (a started completion context of the same DPA context) → {@link #start} →
 * {@link #getDpaHandle} → device posts → {@link #stop} → {@link #destroy}. Attaching after start,
 * or starting with no completion context, is BAD_STATE; destroying started ops IN_USE (stop first);
 * stopping the completion context while the ops are started IN_USE (the context counts them as a
 * user); a second destroy INVALID_VALUE.
 *
 * <p>Underneath ([model]: DOCA does not publish its copy engine): a loopback RC QP of the DPA
 * process (connected to itself; the copies are RDMA WRITEs from the source map's key to the
 * destination's), its send queue of {@code queue_size} WQEs (the next power of two) and doorbell
 * record in the DPA heap, reporting to the completion context's CQ, which records the QP with the
 * ops' user data and where to store its completed index; an outbox for the posts' doorbells; the
 * descriptor the DPA handle names (layout in {@code DocaDpaDevAsyncOps}).
 *
 * <p>Not thread-safe, as DOCA documents; the DPA context's lock is taken for each call.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_async_ops_create, _attach, _start, _get_dpa_handle, _stop, _destroy</a>
 */
public final class DocaDpaAsyncOps {

    private enum State {
        CREATED, STARTED, STOPPED, DESTROYED
    }

    /** The largest queue size ({@code 2^12} send WQEs, DOCA RDMA's bound here too). */
    public static final int MAX_QUEUE_SIZE = 1 << 12;

    private final DocaDpa dpa;
    private final int queueSize;
    private final long userData;
    private State state = State.CREATED;
    private DocaDpaCompletion completion;
    private FlexioOutbox outbox;
    private FlexioQp qp;
    private long wq;
    private long dbr;
    private long desc;
    /** Whether the completion context counts the QP as a user (from start to stop). */
    private boolean attachedQp;

    private DocaDpaAsyncOps(DocaDpa dpa, int queueSize, long userData) {
        this.dpa = dpa;
        this.queueSize = queueSize;
        this.userData = userData;
    }

    /**
     * {@code doca_dpa_async_ops_create(dpa, queue_size, user_data)}: up to {@code queueSize} copies
     * in flight; {@code userData} is what its completions carry (the device's getter returns its low
     * 32 bits, a {@code uint32_t}).
     *
     * @throws DocaException INVALID_VALUE (null, a size outside 1..{@link #MAX_QUEUE_SIZE}), BAD_STATE (the context is not started)
     */
    public static DocaDpaAsyncOps create(DocaDpa dpa, int queueSize, long userData) {
        String w = "doca_dpa_async_ops_create";
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null DPA");
        DocaException.check(queueSize >= 1 && queueSize <= MAX_QUEUE_SIZE, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": queue size " + queueSize + " (1.." + MAX_QUEUE_SIZE + ")");
        DpaObjectLife.requireStarted(dpa, w);
        return new DocaDpaAsyncOps(dpa, queueSize, userData);
    }

    /**
     * {@code doca_dpa_async_ops_attach}: the copies' completions go to {@code comp}; before start.
     *
     * @throws DocaException BAD_STATE (started), INVALID_VALUE (null, destroyed, a completion context of another DPA context)
     */
    public void attach(DocaDpaCompletion comp) {
        String w = "doca_dpa_async_ops_attach";
        check(w);
        DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the async ops are started (attach before doca_dpa_async_ops_start)");
        DocaException.check(comp != null && comp.dpa() == dpa, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + (comp == null ? "null completion context" : comp + " is of another DPA context"));
        completion = comp;
    }

    /**
     * {@code doca_dpa_async_ops_start}: the loopback QP, the outbox and the descriptor.
     *
     * @throws DocaException BAD_STATE (started, no completion context attached, or it is not
     *         started), NO_MEMORY, DRIVER (FlexIO refused a queue)
     */
    public void start() {
        String w = "doca_dpa_async_ops_start";
        check(w);
        DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": started already");
        DocaException.check(completion != null, DocaError.DOCA_ERROR_BAD_STATE, w + ": no completion context (doca_dpa_async_ops_attach first)");
        DpaObjectLife.start(dpa, w, () -> {
            FlexioProcess p = dpa.process(w);
            FlexioCq cq = completion.flexioCq(); // BAD_STATE unless the completion context is started
            int logSq = Math.max(0, 32 - Integer.numberOfLeadingZeros(queueSize - 1));
            wq = dpa.memAlloc(64 + (64L << logSq)); // one receive WQE (unused), then the send queue
            dbr = dpa.memAlloc(64);
            dpa.memset(dbr, 0, 64);
            desc = dpa.memAlloc(DESC_SIZE);
            dpa.memset(desc, 0, DESC_SIZE);
            outbox = FlexioOutbox.create(p);
            qp = FlexioQp.create(p, new FlexioQp.Attr(cq, cq, logSq, 0, 2, wq, dbr));
            qp.modifyToRts(qp.qpNum(), FlexioQp.gid(dpa.dev().ibvContext().queryGid(1, 0))); // to itself: a loopback
            completion.attachQp(qp.qpNum(), (int) userData, desc + OFF_SQ_CI);
            attachedQp = true;
            completion.asyncOps(this, true); // dpa:doca shows it in the completion context's line
            ByteBuffer b = ByteBuffer.allocate(DESC_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(OFF_OUTBOX, outbox.id()).putInt(OFF_QPN, qp.qpNum()).putInt(OFF_LOG_SQ, logSq).putInt(OFF_QUEUE_SIZE, queueSize)
                    .putLong(OFF_SQ, wq + 64).putLong(OFF_DBR, dbr).putInt(OFF_STARTED, 1);
            dpa.h2dMemcpy(desc, b.array());
            state = State.STARTED;
        }, this::release);
    }

    /** {@code doca_dpa_async_ops_get_dpa_handle}: what {@code doca_dpa_dev_post_memcpy} takes. BAD_STATE unless started. */
    public long getDpaHandle() {
        String w = "doca_dpa_async_ops_get_dpa_handle";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": not started");
        return desc;
    }

    /**
     * {@code doca_dpa_async_ops_stop}: a later post ends the DPA process ({@code ERROR_NOT_STARTED}
     * while the descriptor lives); the QP and the memory go. Copies in flight are the caller's
     * (DOCA: stop once they completed). BAD_STATE unless started.
     */
    public void stop() {
        String w = "doca_dpa_async_ops_stop";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": not started");
        dpa.lock.lock();
        try {
            release();
            state = State.STOPPED;
        } finally {
            dpa.lock.unlock();
        }
    }

    /** {@code doca_dpa_async_ops_destroy}: IN_USE while started (stop first), INVALID_VALUE the second time. */
    public void destroy() {
        String w = "doca_dpa_async_ops_destroy";
        check(w);
        DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_IN_USE, w + ": the async ops are started (doca_dpa_async_ops_stop first)");
        state = State.DESTROYED;
    }

    /** What start made, newest first; the memory only while the DPA context lives (it goes with the process otherwise). */
    private void release() {
        assert dpa.lock.isHeldByCurrentThread();
        boolean alive = dpa.started();
        if (desc != 0 && alive) {
            try {
                dpa.memset(desc + OFF_STARTED, 0, 4); // a post from here on is ERROR_NOT_STARTED
            } catch (DocaException e) {
                // the process ended in error: nothing posts any more
            }
        }
        if (qp != null) {
            if (alive) {
                qp.destroy();
            }
            qp = null;
            if (attachedQp) {
                completion.detachQp();
                completion.asyncOps(this, false);
                attachedQp = false;
            }
        }
        if (outbox != null) {
            if (alive) {
                outbox.destroy();
            }
            outbox = null;
        }
        for (long a : new long[] {wq, dbr, desc}) {
            if (a != 0 && alive) {
                try {
                    dpa.memFree(a);
                } catch (DocaException e) {
                    // the process ended in error: its heap goes with it at doca_dpa_stop
                }
            }
        }
        wq = dbr = desc = 0;
    }

    private void check(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": destroyed already");
    }

    /** Its queue size as created. */
    public int queueSize() {
        return queueSize;
    }

    @Override
    public String toString() {
        return "doca_dpa_async_ops " + (qp == null ? "" : "qp 0x" + Integer.toHexString(qp.qpNum()) + " ") + state.name().toLowerCase()
                + ", queue " + queueSize + ", user data " + userData;
    }
}
