package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A completion queue ({@code SW2HW_CQ}): a ring of CQE slots the device writes (the CQ writer,
 * {@link #push}) and the driver reads. The driver polls without a device lock: it reads
 * {@link #producerIndex()}, reads the CQEs below it, then writes its consumer index to the doorbell
 * record ({@link #consumerIndex(long)}). A CQE that would overwrite one the driver has not
 * consumed is a CQ overrun: the CQ goes to error and raises a CQ-error event, as the hardware does.
 *
 * <p>Lock rules: {@link #lock} serialises the producers (every QP whose completions go here); it is
 * a leaf. Events are delivered after it is released.
 */
public final class HwCq {

    final HcaDevice dev;
    public final int cqn;
    private final Cqe[] ring;
    private final int mask;
    /** The ring's size (a power of two): {@code ring.length}, or the memory ring's when {@link #sink} is set. */
    private final int size;
    /** Non-null for a CQ in host memory: CQEs are written there (one scratch {@link Cqe} in {@link #ring}). */
    private final CqeSink sink;
    /** The sink's consumer counter as last read (producers' field, under lock). */
    private long sinkCi;
    private final ReentrantLock lock = new ReentrantLock();
    /**
     * Producer index: CQEs below it are written. Written under lock with release semantics after
     * the CQE's fields; the driver reads it with acquire (a single-producer, single-consumer
     * hand-off needs no full fence).
     */
    private long pi;
    /** Consumer index (the driver's doorbell record): release by the driver, acquire here. */
    private long ci;
    private static final java.lang.invoke.VarHandle PI;
    private static final java.lang.invoke.VarHandle CI;

    static {
        try {
            java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
            PI = l.findVarHandle(HwCq.class, "pi", long.class);
            CI = l.findVarHandle(HwCq.class, "ci", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
    private boolean armed;
    /**
     * Completion events raised (an armed CQ's completion, an arm that fired at once, a zero CQE),
     * counted under the lock when decided, before delivery: a consumer that counts the events it
     * received knows one is on its way while its count is behind ({@link #armState}). Guarded by
     * the lock.
     */
    private long eventsRaised;
    private boolean solicitedOnly;
    /** Producer counter after the last solicited or error CQE (0: none); under lock. */
    private long solicitedPi;
    private volatile boolean error;
    /** Guarded by lock: a destroyed CQ swallows late completions of destroyed QPs. */
    private boolean destroyed;
    /** QPs using the CQ; HW2SW_CQ is refused while non-zero. Changed under the device monitor. */
    final AtomicInteger users = new AtomicInteger();

    HwCq(HcaDevice dev, int cqn, int cqe, CqeSink sink) {
        this.dev = dev;
        this.cqn = cqn;
        this.sink = sink;
        this.size = HcaDevice.roundUpPow2(cqe);
        this.ring = new Cqe[sink == null ? size : 1];
        this.mask = ring.length - 1;
        for (int i = 0; i < ring.length; i++) {
            ring[i] = new Cqe();
        }
    }

    /**
     * The CQ writer: writes one CQE. Returns false on overrun (the CQ is then in error and the
     * completion is lost). A non-success outcome becomes an error CQE with its syndrome.
     */
    boolean push(int qpn, boolean isSend, long wqeIndex, int opcode, Outcome o, int byteCnt, int imm, int flags, int srcQp,
            int slid, boolean solicited) {
        return push(qpn, 0, isSend, wqeIndex, opcode, o, byteCnt, imm, flags, srcQp, slid, solicited);
    }

    /** {@link #push} of a receive taken from SRQ {@code srqn} (0: none). */
    boolean push(int qpn, int srqn, boolean isSend, long wqeIndex, int opcode, Outcome o, int byteCnt, int imm, int flags, int srcQp,
            int slid, boolean solicited) {
        if (o != Outcome.SUCCESS) {
            // the port's error counters (DIAG_RPRT); a plain read of the QP table, no lock taken under the CQ's
            HwQp q = dev.qp(qpn);
            if (q != null) {
                dev.ports[q.portNum - 1].counters.errorCompletion(isSend, o.syndrome);
            }
        }
        boolean notify;
        boolean overrun = false;
        lock.lock();
        try {
            if (destroyed) {
                return true;
            }
            if (error) {
                return false;
            }
            long p = pi; // the producers' own field, under lock
            if (full(p)) {
                error = true;
                dev.cqOverruns.incrementAndGet();
                overrun = true;
                notify = true; // a CQ error event, not a completion event: not counted
            } else {
                Cqe c = ring[(int) p & mask];
                c.qpn = qpn;
                c.isSend = isSend;
                c.wqeIndex = wqeIndex;
                if (o == Outcome.SUCCESS) {
                    c.opcode = opcode;
                    c.syndrome = 0;
                    c.vendorSyndrome = 0;
                } else {
                    c.opcode = Cqe.OPCODE_ERROR;
                    c.errorOpcode = opcode;
                    c.syndrome = o.syndrome;
                    c.vendorSyndrome = 0x50 | o.syndrome;
                }
                c.byteCnt = byteCnt;
                c.imm = imm;
                c.flags = flags;
                c.srcQp = srcQp;
                c.slid = slid;
                c.srqn = srqn;
                if (sink != null) {
                    sink.write(p, c);
                }
                PI.setRelease(this, p + 1);
                if (solicited || o != Outcome.SUCCESS) {
                    solicitedPi = p + 1;
                }
                notify = armed && (!solicitedOnly || solicited || o != Outcome.SUCCESS);
                if (notify) {
                    armed = false;
                    eventsRaised++;
                }
            }
        } finally {
            lock.unlock();
        }
        if (notify) {
            deliver(overrun);
        }
        return !overrun;
    }

    /** Under lock: whether CQE {@code p} would overwrite one the driver has not consumed. */
    private boolean full(long p) {
        assert lock.isHeldByCurrentThread();
        if (sink == null) {
            return p - (long) CI.getAcquire(this) == size;
        }
        // the doorbell record holds 24 bits of the consumer counter: read it only when the cached one says full
        if (((p - sinkCi) & 0xff_ffff) < size) {
            return false;
        }
        sinkCi = sink.consumerIndex();
        return ((p - sinkCi) & 0xff_ffff) >= size;
    }

    /** The CQE slot of index {@code index} (valid when below {@link #producerIndex()}; not for a CQ in host memory). */
    public Cqe cqe(long index) {
        return ring[(int) index & mask];
    }

    public long producerIndex() {
        return (long) PI.getAcquire(this);
    }

    /** The consumer-index doorbell record: CQEs below {@code index} are consumed. */
    public void consumerIndex(long index) {
        CI.setRelease(this, index);
    }

    /**
     * Arms the CQ ({@code MLX4_CQ_DB_REQ_NOT} / {@code _SOL}, {@code MLX5_CQ_DB_REQ_NOT} / {@code _SOL})
     * with the consumer index {@code ci} the doorbell carries (its low 24 bits count): the next
     * completion (solicited or error only, if asked) raises a completion event, and so does one
     * already waiting at or past {@code ci}, at once. The driver has not seen such a CQE, and
     * drivers arm after their last poll without polling again ({@code mlx5e_napi_poll}, the
     * FlexIO drain–arm–reschedule handler): without this rule a CQE landing between the poll
     * and the arm would wait for the next completion to be noticed. One event per arm.
     *
     * @see <a href="https://github.com/linux-rdma/rdma-core/blob/master/providers/mlx5/cq.c">mlx5_arm_cq</a>
     */
    public void arm(boolean solicitedOnlyEvents, long ci) {
        boolean notify;
        lock.lock();
        try {
            if (destroyed || error) {
                return;
            }
            long p = pi;
            notify = waiting(solicitedOnlyEvents ? solicitedPi : p, p, ci);
            armed = !notify;
            if (notify) {
                eventsRaised++;
            }
            solicitedOnly = solicitedOnlyEvents;
        } finally {
            lock.unlock();
        }
        if (notify) {
            deliver(false);
        }
    }

    /**
     * A zero CQE ({@code RXT_DB} from a DPA outbox): a completion event with no CQE, raised whether
     * or not the CQ is armed (it does not disarm it). Ignored on a destroyed CQ.
     */
    public void zeroCqe() {
        lock.lock();
        try {
            if (destroyed) {
                return;
            }
            eventsRaised++;
        } finally {
            lock.unlock();
        }
        deliver(false);
    }

    /** Raises the event decided (and counted) under the lock, outside it: the handler takes other locks. */
    private void deliver(boolean overrun) {
        CqEventHandler h = dev.eventHandler;
        if (h != null) {
            h.cqEvent(this, overrun);
        }
    }

    /** Whether the CQ is armed, and how many completion events it has raised: one snapshot. */
    public record ArmState(boolean armed, long eventsRaised) {
    }

    /**
     * The CQ's arming and its event count in one snapshot under the lock. A check of "will the
     * next completion wake the consumer" (the DPA's lost wake-up check) compares the count with the
     * events the consumer received: an event raised (armed cleared) but not yet received is on its
     * way, one received has done its work.
     */
    public ArmState armState() {
        lock.lock();
        try {
            return new ArmState(armed, eventsRaised);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Under lock: whether the CQE below counter {@code upTo} is at or past the 24-bit consumer
     * index {@code ci} and not yet overwritten by producer counter {@code p} (a stale index or a
     * CQE older than the ring are not waiting).
     */
    private boolean waiting(long upTo, long p, long ci) {
        assert lock.isHeldByCurrentThread();
        long ahead = (upTo - ci) & 0xff_ffff; // CQEs from ci up to upTo
        return upTo > 0 && ahead > 0 && ahead <= size && p - upTo < size;
    }

    /** Whether the CQ is armed: its next completion (of the kind asked) raises an event. */
    public boolean armed() {
        lock.lock();
        try {
            return armed;
        } finally {
            lock.unlock();
        }
    }

    /** True when the CQ overran. */
    public boolean inError() {
        return error;
    }

    /** The number of CQE slots: the requested count rounded up to a power of two. */
    public int size() {
        return size;
    }

    void markDestroyed() {
        lock.lock();
        try {
            destroyed = true;
        } finally {
            lock.unlock();
        }
    }

    boolean isDestroyed() {
        lock.lock();
        try {
            return destroyed;
        } finally {
            lock.unlock();
        }
    }
}
