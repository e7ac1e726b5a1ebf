package org.peerdirect.doca.rdma;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevRdma.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.flexio.FlexioCq;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioOutbox;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioQp;

/**
 * {@code struct doca_rdma} with its data path on the DPA ({@code doca_rdma.h},
 * {@code doca_ctx_set_datapath_on_dpa}): a context of up to {@link #setMaxNumConnections} RC
 * connections whose DPA code posts through {@link org.peerdirect.doca.dpa.dev.DocaDpaDevRdma}.
 *
 * <p>Order as in DOCA: {@link #create} → configuration ({@link #setPermissions},
 * {@link #setDatapathOnDpa}, queue sizes, {@link #setMaxNumConnections},
 * {@link #dpaCompletionAttach}) → {@link #start} → {@link #export} (one connection each time; its
 * details go to the other side) → {@link #connect} with the other side's details → DPA posts →
 * {@link #stop} → {@link #destroy}.
 *
 * <p>Underneath ([model], libdoca_rdma's internals are not public; as FlexIO's {@code flexio_qp}):
 * per connection a DevX RC QP on the DPA process's PD whose work queue and doorbell record live in
 * the DPA heap, its send and receive CQ the attached completion context's CQ (or, with none
 * attached, a CQ of the context's own that nothing reads: completions requested then are lost, as
 * DOCA gives them nowhere to go); an outbox for the posts' doorbells; and the descriptor the DPA
 * handle names (layout in {@code DocaDpaDevRdma}), with a scratch word and its key (where a
 * {@code signal_add}'s fetched value lands). The permissions are recorded and checked for
 * DOCA's values; the QPs allow remote read, write and atomics (FlexIO's {@code flexio_qp_modify}).
 *
 * <p>Not thread-safe, as DOCA documents (one caller at a time).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+rdma/index.html">DOCA RDMA</a>
 */
public final class DocaRdma {

    private enum State {
        CREATED, STARTED, STOPPED, DESTROYED
    }

    /** The connection details and the new connection of {@link #export} ({@code doca_rdma_export}'s out parameters). */
    public record Export(byte[] connectionDetails, DocaRdmaConnection connection) {
    }

    private final DocaDev dev;
    private State state = State.CREATED;
    private int permissions = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE;
    private DocaDpa dpa;
    private int sendQueueSize = 64;
    private int recvQueueSize = 64;
    private int maxConnections = 1;
    private DocaDpaCompletion completion;
    private FlexioProcess process;
    private FlexioOutbox outbox;
    private FlexioCq ownCq;
    private long ownCqMem;
    private long desc;
    private long scratch;
    private org.peerdirect.flexio.FlexioMkey scratchKey;
    private final List<DocaRdmaConnection> connections = new ArrayList<>();

    private DocaRdma(DocaDev dev) {
        this.dev = dev;
    }

    /** {@code doca_rdma_create}: INVALID_VALUE for a null or closed device. */
    public static DocaRdma create(DocaDev dev) {
        String w = "doca_rdma_create";
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null device");
        dev.checkOpen(w);
        DocaRdma r = new DocaRdma(dev);
        dev.hold(r);
        return r;
    }

    /** {@code doca_rdma_set_permissions}: DOCA access flags; before start. */
    public void setPermissions(int accessMask) {
        configurable("doca_rdma_set_permissions");
        DocaException.check(accessMask != 0 && (accessMask & ~(DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.RDMA_ANY)) == 0,
                DocaError.DOCA_ERROR_INVALID_VALUE, "doca_rdma_set_permissions: " + DocaAccessFlag.toString(accessMask) + " (local and RDMA flags only)");
        permissions = accessMask;
    }

    /** {@code doca_rdma_get_permissions}. */
    public int getPermissions() {
        return permissions;
    }

    /** {@code doca_ctx_set_datapath_on_dpa}: the DPA context whose threads post (started, on this device); before start. */
    public void setDatapathOnDpa(DocaDpa dpa) {
        String w = "doca_ctx_set_datapath_on_dpa";
        configurable(w);
        DocaException.check(dpa != null && dpa.dev() == dev, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + (dpa == null ? "null DPA" : dpa + " is on another device than " + dev.name()));
        this.dpa = dpa;
    }

    /** {@code doca_rdma_set_send_queue_size}: WQEs per connection (rounded up to a power of two); before start. */
    public void setSendQueueSize(int size) {
        configurable("doca_rdma_set_send_queue_size");
        DocaException.check(size >= 1 && size <= 1 << 12, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_rdma_set_send_queue_size: " + size + " (1..4096)");
        sendQueueSize = size;
    }

    /** {@code doca_rdma_set_recv_queue_size}: receives per connection (rounded up to a power of two); before start. */
    public void setRecvQueueSize(int size) {
        configurable("doca_rdma_set_recv_queue_size");
        DocaException.check(size >= 1 && size <= 1 << 12, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_rdma_set_recv_queue_size: " + size + " (1..4096)");
        recvQueueSize = size;
    }

    /** {@code doca_rdma_set_max_num_connections}; before start. */
    public void setMaxNumConnections(int n) {
        configurable("doca_rdma_set_max_num_connections");
        DocaException.check(n >= 1 && n <= MAX_CONNECTIONS, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_rdma_set_max_num_connections: " + n + " (1.." + MAX_CONNECTIONS + ")");
        maxConnections = n;
    }

    /**
     * {@code doca_rdma_dpa_completion_attach}: the connections' completions go to {@code comp}
     * (started, of the data path's DPA context); before start.
     */
    public void dpaCompletionAttach(DocaDpaCompletion comp) {
        String w = "doca_rdma_dpa_completion_attach";
        configurable(w);
        DocaException.check(comp != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null completion context");
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_BAD_STATE, w + ": no data path on a DPA (doca_ctx_set_datapath_on_dpa first)");
        DocaException.check(comp.dpa() == dpa, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": " + comp + " is of another DPA context");
        completion = comp;
    }

    /**
     * {@code doca_ctx_start}: the outbox, the descriptor, and (with no completion attached) a CQ of its own.
     *
     * @throws DocaException BAD_STATE (started), NOT_SUPPORTED (no data path on the DPA: the host
     *         data path, DOCA RDMA tasks, is not built), NO_MEMORY, DRIVER
     */
    public void start() {
        String w = "doca_ctx_start (doca_rdma)";
        configurable(w);
        dev.checkOpen(w);
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": only a data path on the DPA is built (doca_ctx_set_datapath_on_dpa); DOCA RDMA tasks on the host are not");
        process = dpa.flexioProcess();
        try {
            if (completion != null) {
                completion.flexioCq(); // BAD_STATE if it was stopped since
            } else {
                int log = log2(Math.max(sendQueueSize, recvQueueSize) * maxConnections);
                ownCqMem = dpa.memAlloc((64L << log) + 64);
                byte[] cqes = new byte[64 << log];
                for (int i = 63; i < cqes.length; i += 64) {
                    cqes[i] = (byte) 0xf1; // CQE_INVALID, owner 1: hardware's
                }
                dpa.h2dMemcpy(ownCqMem, cqes);
                dpa.memset(ownCqMem + (64L << log), 0, 64);
                ownCq = FlexioCq.create(process, new FlexioCq.Attr(log, FlexioCq.ElementType.NON_DPA_CQ, null, ownCqMem, ownCqMem + (64L << log)));
            }
            outbox = FlexioOutbox.create(process);
            scratch = dpa.memAlloc(64);
            scratchKey = org.peerdirect.flexio.FlexioMkey.deviceMkeyCreate(process, scratch, 64);
            desc = dpa.memAlloc(DESC_SIZE);
            dpa.memset(desc, 0, DESC_SIZE);
            dpa.h2dMemcpy(desc, ByteBuffer.allocate(OFF_SCRATCH + 8).order(ByteOrder.LITTLE_ENDIAN).putInt(OFF_OUTBOX, outbox.id())
                    .putInt(OFF_SCRATCH_KEY, scratchKey.id()).putLong(OFF_SCRATCH, scratch).array());
        } catch (FlexioException e) {
            release();
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            release();
            throw e;
        }
        state = State.STARTED;
    }

    /** {@code doca_rdma_get_dpa_handle}: what {@code doca_dpa_dev_rdma_post_*} take. BAD_STATE unless started. */
    public long getDpaHandle() {
        started("doca_rdma_get_dpa_handle");
        return desc;
    }

    /**
     * {@code doca_rdma_export}: a new connection (its QP in the DPA heap, in RESET) and the details
     * the other side connects with.
     *
     * @throws DocaException BAD_STATE (not started), FULL (the maximum number of connections), NO_MEMORY, DRIVER
     */
    public Export export() {
        String w = "doca_rdma_export";
        started(w);
        DocaException.check(connections.size() < maxConnections, DocaError.DOCA_ERROR_FULL,
                w + ": the context has its maximum of " + maxConnections + " connection(s) (doca_rdma_set_max_num_connections)");
        int id = connections.size();
        int logSq = log2(sendQueueSize);
        int logRq = log2(recvQueueSize);
        long wq = 0;
        long dbr = 0;
        FlexioQp qp = null;
        try {
            wq = dpa.memAlloc(((long) RQ_STRIDE << logRq) + (64L << logSq));
            dbr = dpa.memAlloc(64);
            dpa.memset(dbr, 0, 64);
            FlexioCq cq = completion != null ? completion.flexioCq() : ownCq;
            qp = FlexioQp.create(process, new FlexioQp.Attr(cq, cq, logSq, logRq, LOG_RQ_STRIDE, wq, dbr));
            if (completion != null) {
                completion.attachQp(qp.qpNum(), id);
            }
        } catch (RuntimeException e) {
            if (qp != null) {
                qp.destroy();
            }
            for (long a : new long[] {wq, dbr}) {
                if (a != 0) {
                    dpa.memFree(a);
                }
            }
            throw e instanceof FlexioException f ? new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + f.getMessage(), f) : e;
        }
        DocaRdmaConnection c = new DocaRdmaConnection(this, id, qp, wq, dbr);
        connections.add(c);
        ByteBuffer b = ByteBuffer.allocate(CONN_SIZE).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(C_QPN, qp.qpNum()).putInt(C_LOG_SQ, logSq).putInt(C_LOG_RQ, logRq).putLong(C_WQ, wq).putLong(C_DBR, dbr);
        dpa.h2dMemcpy(desc + OFF_CONN + (long) CONN_SIZE * id, b.array());
        dpa.h2dMemcpy(desc + OFF_NCONN, le32(connections.size()));
        byte[] gid = FlexioQp.gid(dev.ibvContext().queryGid(1, 0));
        return new Export(new RdmaConnDesc(qp.qpNum(), 0, gid, dev.asDevinfo().ibvDevice().nodeGuid()).toBytes(), c);
    }

    /**
     * {@code doca_rdma_connect}: {@code connection} (of {@link #export}) to the other side's details;
     * DPA posts may use it from here on.
     *
     * @throws DocaException BAD_STATE (not started, connected already), INVALID_VALUE (details that
     *         are not ours, a connection of another context), DRIVER (the QP refused the path)
     */
    public void connect(byte[] remoteDetails, DocaRdmaConnection connection) {
        String w = "doca_rdma_connect";
        started(w);
        RdmaConnDesc r = RdmaConnDesc.parse(w, remoteDetails);
        DocaException.check(connection != null && connection.rdma == this, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + (connection == null ? "null connection" : connection + " is of another context"));
        DocaException.check(!connection.connected, DocaError.DOCA_ERROR_BAD_STATE, w + ": " + connection + " is connected already");
        try {
            connection.qp.modifyToRts(r.qpn(), r.gid());
        } catch (FlexioException e) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + e.getMessage(), e);
        }
        connection.connected = true;
        dpa.h2dMemcpy(desc + OFF_CONN + (long) CONN_SIZE * connection.id + C_CONNECTED, le32(1));
    }

    /** The connections made so far (for {@code dpa:} commands and tests). */
    public List<DocaRdmaConnection> connections() {
        return List.copyOf(connections);
    }

    /** {@code doca_ctx_stop}: the connections' QPs and the context's queues go. BAD_STATE unless started. */
    public void stop() {
        started("doca_ctx_stop (doca_rdma)");
        release();
        state = State.STOPPED;
    }

    /** {@code doca_rdma_destroy}: stops a started context first; INVALID_VALUE the second time. */
    public void destroy() {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_rdma_destroy: destroyed already");
        if (state == State.STARTED) {
            stop();
        }
        state = State.DESTROYED;
        dev.unhold(this);
    }

    /** Everything {@link #start} and {@link #export} made, newest first; the memory only while the DPA context lives. */
    private void release() {
        for (int i = connections.size() - 1; i >= 0; i--) {
            DocaRdmaConnection c = connections.get(i);
            c.qp.destroy();
            if (completion != null) {
                completion.detachQp();
            }
            free(c.wq);
            free(c.dbr);
        }
        connections.clear();
        if (outbox != null) {
            outbox.destroy();
            outbox = null;
        }
        if (scratchKey != null) {
            scratchKey.destroy();
            scratchKey = null;
        }
        free(scratch);
        scratch = 0;
        if (ownCq != null) {
            ownCq.destroy();
            ownCq = null;
        }
        free(ownCqMem);
        free(desc);
        ownCqMem = 0;
        desc = 0;
    }

    private void free(long daddr) {
        if (daddr != 0) {
            try {
                dpa.memFree(daddr);
            } catch (DocaException e) {
                // the DPA context stopped first: the memory went with its process
            }
        }
    }

    private void configurable(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the context was destroyed");
        DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the context is started");
    }

    private void started(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the context was destroyed");
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": the context is " + state.name().toLowerCase() + " (doca_ctx_start first)");
    }

    private static int log2(int n) {
        return Math.max(0, 32 - Integer.numberOfLeadingZeros(n - 1));
    }

    private static byte[] le32(int v) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).array();
    }

    @Override
    public String toString() {
        return "doca_rdma on " + dev.name() + " (" + state.name().toLowerCase() + ", " + connections.size() + "/" + maxConnections + " connections)";
    }
}
