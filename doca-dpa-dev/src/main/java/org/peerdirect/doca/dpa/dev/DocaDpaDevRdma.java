package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev_rdma.h}: posts on a DOCA RDMA context whose data path is on the DPA
 * ({@code doca_rdma_set_datapath_on_dpa}) by its DPA handle ({@code doca_rdma_get_dpa_handle}).
 *
 * <p>[model] DOCA does not publish what a {@code doca_dpa_dev_rdma_t} is. Here it is the DPA address
 * of the context's descriptor, written by the host library (libdoca_rdma), little-endian: the
 * outbox the posts ring through {@link #OFF_OUTBOX}, the number of connections {@link #OFF_NCONN},
 * the connection the next receive goes to {@link #OFF_NEXT_RQ}, then per connection
 * {@link #CONN_SIZE} bytes from {@link #OFF_CONN}: QP number, connected flag, send producer index,
 * index of the last doorbell, log2 send and receive depths, the work queue (receive WQEs of
 * {@link #RQ_STRIDE} bytes, then the send WQE blocks) and the QP's doorbell record, all in DPA memory.
 *
 * <p>A {@code doca_dpa_dev_mmap_t} is the key of the memory's mkey ({@code doca_mmap_dev_get_dpa_handle}):
 * the local key of a map of this side, the remote key of a map created from another side's export.
 *
 * <p>Submit flags: without {@link #SUBMIT_FLAG_FLUSH} the WQE is written and its doorbell deferred
 * to the next flushed post on the connection (DOCA: "the context may aggregate the operation and
 * not flush it immediately"); without {@link #SUBMIT_FLAG_OPTIMIZE_REPORTS} the operation raises a
 * completion on the attached completion context when done, with it none (a later reported
 * completion on the connection covers it, as mlx5's selective signalling does).
 *
 * <p>Receives: DOCA shares one receive queue among a context's connections ({@code post_receive}
 * names none). [model] The model has no SRQ in DPA memory, so {@link #postReceive} posts on the
 * connections' own receive queues in turn. Memory model: every WQE is written back
 * ({@code __dpa_thread_memory_writeback}) before its doorbell, a receive WQE is fenced before its
 * doorbell record; the checker sees each store (flexio-dev's helpers).
 *
 * <p>Not thread-safe, as DOCA documents ("All DOCA DPA objects are non-thread-safe", DOCA DPA
 * Comms). Every post and signal tells the checker which object it is inside
 * ({@code Dpa.objectEnter}/{@code objectLeave}), so two harts in one at once are C8 (strict: the
 * process ends naming both sites). <b>The rule, per call</b> (C8's key is the object whose state the
 * call changes, as DOCA's API hands it to the caller):
 * <ul>
 * <li>{@link #postReceive} ({@code doca_dpa_dev_rdma_post_receive(rdma, mmap, addr, length)}) names
 * no connection: the receive queue is the handle's, shared by its connections (DOCA RDMA posts
 * receives on the context, not on a connection). Two threads posting receives on one handle both
 * advance that queue's producer index: they race in DOCA's model too. Key: the handle. Tested:
 * two ranks posting receives on one handle are C8.</li>
 * <li>Posts and signals ({@code post_write/_imm}, {@code post_send/_imm}, {@code signal_set/_add})
 * take the handle and a {@code connection_id}; what they change is that connection's send queue
 * (each connection is a QP of its own, with its own producer index and doorbell; the handle's
 * fields they read, outbox and scratch key, are written only by the host library before start).
 * Two threads on one connection race; two on different connections of one handle touch disjoint
 * queues. Key: the connection (its descriptor's address). Tested: two ranks on one connection
 * are C8, one connection each is silent, a rank posting receives beside one writing on a
 * connection of the same handle is silent (a receive queue and a send queue).</li>
 * </ul>
 * [model] DOCA says only "objects"; the connection is not a device-side object of its API, so
 * keying sends on the handle would be the literal reading. It would call C8 on code DOCA's
 * design allows (each connection its own QP; the connection id exists so one handle can serve
 * several peers) and on the model's all-to-all, whose ranks post to distinct peers on distinct
 * connections of one handle. DOCA's own {@code dpa_all_to_all} gives each peer a handle and is
 * silent under either reading. A signal_add's fetched value lands in the handle's scratch word
 * from any connection: written by the NIC only, read by no thread, so no race among harts. A
 * post that ends the process (a bad connection) does not leave: the silicon lets go of what an
 * ended activation held.
 *
 * <p>Signals ({@link #signalSet}, {@link #signalAdd}) update a remote node's sync event through its
 * DPA handle ({@link #REMOTE_EVENT_ADDR}) on the connection's send queue, so they come after the
 * connection's earlier writes (RC executes a send queue in order).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_dev_rdma_post_write, _post_send, _post_send_imm, _post_receive, _signal_set, _signal_add</a>
 */
public final class DocaDpaDevRdma {

    /** {@code DOCA_DPA_DEV_SUBMIT_FLAG_NONE}. */
    public static final int SUBMIT_FLAG_NONE = 0;
    /** {@code DOCA_DPA_DEV_SUBMIT_FLAG_FLUSH}: ring the doorbell for this and earlier posts now. */
    public static final int SUBMIT_FLAG_FLUSH = 1;
    /** {@code DOCA_DPA_DEV_SUBMIT_FLAG_OPTIMIZE_REPORTS}: no completion of its own. */
    public static final int SUBMIT_FLAG_OPTIMIZE_REPORTS = 2;

    public static final int OFF_OUTBOX = 0;
    public static final int OFF_NCONN = 4;
    public static final int OFF_NEXT_RQ = 8;
    /** The key of the context's 8-byte scratch word, and its address: where a signal_add's fetched value lands. */
    public static final int OFF_SCRATCH_KEY = 12;
    public static final int OFF_SCRATCH = 16;
    public static final int OFF_CONN = 64;
    public static final int CONN_SIZE = 64;
    public static final int C_QPN = 0, C_CONNECTED = 4, C_SQ_PI = 8, C_SQ_DB = 12, C_LOG_SQ = 16, C_LOG_RQ = 20, C_WQ = 24, C_DBR = 32;
    /** Connections a context can have. */
    public static final int MAX_CONNECTIONS = 16;
    /** Bytes of a context's descriptor. */
    public static final int DESC_SIZE = OFF_CONN + CONN_SIZE * MAX_CONNECTIONS;
    /** log2 of a receive WQE's bytes (one data segment and a terminating one, in 64 bytes). */
    public static final int LOG_RQ_STRIDE = 2;
    /** Bytes of a receive WQE. */
    public static final int RQ_STRIDE = 16 << LOG_RQ_STRIDE;
    /** {@code MLX5_INVALID_LKEY}: ends a receive WQE's scatter list. */
    static final int INVALID_LKEY = 0x100;
    /**
     * A remote sync event's DPA handle ({@code doca_sync_event_remote_net_get_dpa_handle}) [model]:
     * the DPA address of {@link #REMOTE_EVENT_SIZE} bytes holding the remote counter's address
     * ({@link #REMOTE_EVENT_ADDR}, u64) and key ({@link #REMOTE_EVENT_RKEY}, u32).
     */
    public static final int REMOTE_EVENT_ADDR = 0, REMOTE_EVENT_RKEY = 8, REMOTE_EVENT_SIZE = 16;
    /** {@code MLX5_OPCODE_ATOMIC_FA}. */
    static final int OPCODE_ATOMIC_FA = 0x12;
    /** IBA 1.5 ATOMIC WRITE: the model's opcode (the IBA RC opcode; the PRM defines none, hca-sim's {@code Wqe.OP_ATOMIC_WRITE}). */
    static final int OPCODE_ATOMIC_WRITE = 0x1d;

    /** A process error code ({@code flexio_dev_error}) for a post on a connection that does not exist or is not connected. */
    public static final int ERROR_BAD_CONNECTION = 0xd1;

    private DocaDpaDevRdma() {
    }

    /** The descriptor of connection {@code id}; a connection not connected ends the process with {@link #ERROR_BAD_CONNECTION}. */
    private static long conn(long rdma, int id) {
        if (id < 0 || id >= Dpa.ld32(rdma + OFF_NCONN)) {
            FlexioDev.error(ERROR_BAD_CONNECTION);
        }
        long c = rdma + OFF_CONN + (long) CONN_SIZE * id;
        if (Dpa.ld32(c + C_CONNECTED) == 0) {
            FlexioDev.error(ERROR_BAD_CONNECTION);
        }
        return c;
    }

    /** {@code doca_dpa_dev_rdma_post_write}: {@code length} bytes from the local map to the remote one. */
    public static void postWrite(long rdma, int connectionId, int dstMmap, long dstAddr, int srcMmap, long srcAddr, long length, int flags) {
        post(rdma, connectionId, FlexioDevQueue.OPCODE_RDMA_WRITE, dstMmap, dstAddr, srcMmap, srcAddr, length, 0, flags);
    }

    /** {@code doca_dpa_dev_rdma_post_write_imm}: as {@link #postWrite}, the receiver's completion carrying {@code immediate}. */
    public static void postWriteImm(long rdma, int connectionId, int dstMmap, long dstAddr, int srcMmap, long srcAddr, long length,
            int immediate, int flags) {
        post(rdma, connectionId, FlexioDevQueue.OPCODE_RDMA_WRITE_IMM, dstMmap, dstAddr, srcMmap, srcAddr, length, immediate, flags);
    }

    /** {@code doca_dpa_dev_rdma_post_send}: {@code length} bytes of the map at {@code addr} to the peer's next receive. */
    public static void postSend(long rdma, int connectionId, int mmap, long addr, long length, int flags) {
        post(rdma, connectionId, FlexioDevQueue.OPCODE_SEND, 0, 0, mmap, addr, length, 0, flags);
    }

    /** {@code doca_dpa_dev_rdma_post_send_imm}: as {@link #postSend} with an immediate. */
    public static void postSendImm(long rdma, int connectionId, int mmap, long addr, long length, int immediate, int flags) {
        post(rdma, connectionId, FlexioDevQueue.OPCODE_SEND_IMM, 0, 0, mmap, addr, length, immediate, flags);
    }

    private static void post(long rdma, int id, int opcode, int rkey, long raddr, int lkey, long addr, long length, int imm, int flags) {
        long c = conn(rdma, id);
        Dpa.objectEnter(c);
        int qpn = Dpa.ld32(c + C_QPN);
        int logSq = Dpa.ld32(c + C_LOG_SQ);
        int pi = Dpa.ld32(c + C_SQ_PI);
        long sq = Dpa.ld64(c + C_WQ) + ((long) RQ_STRIDE << Dpa.ld32(c + C_LOG_RQ));
        long wqe = FlexioDevQueue.swqeAt(sq, pi, logSq);
        boolean rdmaOp = opcode == FlexioDevQueue.OPCODE_RDMA_WRITE || opcode == FlexioDevQueue.OPCODE_RDMA_WRITE_IMM;
        int ce = (flags & SUBMIT_FLAG_OPTIMIZE_REPORTS) != 0 ? 0 : FlexioDevQueue.CTRL_CQ_UPDATE;
        FlexioDevQueue.swqeSegCtrlSet(wqe, pi, qpn, ce, opcode, rdmaOp ? 3 : 2, imm);
        long seg = wqe + FlexioDevQueue.SEG_SIZE;
        if (rdmaOp) {
            FlexioDevQueue.swqeSegRdmaSet(seg, rkey, raddr);
            seg += FlexioDevQueue.SEG_SIZE;
        }
        FlexioDevQueue.swqeSegMemPtrDataSet(seg, (int) length, lkey, addr);
        pi++;
        Dpa.st32(c + C_SQ_PI, pi);
        if ((flags & SUBMIT_FLAG_FLUSH) != 0) {
            ringAndLeave(rdma, c, qpn, pi);
        } else {
            Dpa.objectLeave(c);
        }
    }

    /**
     * The doorbell for every WQE up to {@code pi}: the connection's last doorbell recorded and the
     * WQEs (and their data) written back first, then the connection left (C8), then the doorbell.
     * The doorbell is the call's last act and touches none of the connection's state: the thread a
     * completion of this very post wakes may post on the connection at once (NVIDIA's ping-pong
     * posts the first send from an RPC, the next ones from the thread).
     */
    private static void ringAndLeave(long rdma, long c, int qpn, int pi) {
        Dpa.st32(c + C_SQ_DB, pi);
        Dpa.memoryWriteback();
        Dpa.objectLeave(c);
        FlexioDev.outboxConfig(Dpa.ld32(rdma + OFF_OUTBOX));
        FlexioDev.qpSqRingDb(pi, qpn);
    }

    /**
     * {@code doca_dpa_dev_rdma_post_receive}: a receive of up to {@code length} bytes into the map at
     * {@code addr}, on the next connection in turn ([model], see the class comment); its completion
     * comes to the attached completion context.
     */
    public static void postReceive(long rdma, int mmap, long addr, long length) {
        Dpa.objectEnter(rdma);
        int n = Dpa.ld32(rdma + OFF_NCONN);
        int id = Dpa.ld32(rdma + OFF_NEXT_RQ);
        for (int k = 0; k < n && Dpa.ld32(rdma + OFF_CONN + (long) CONN_SIZE * id + C_CONNECTED) == 0; k++) {
            id = (id + 1) % n; // the next connected one
        }
        long c = conn(rdma, id);
        Dpa.st32(rdma + OFF_NEXT_RQ, (id + 1) % n);
        long dbr = Dpa.ld64(c + C_DBR);
        int rpi = FlexioDevQueue.dbrRqGetPi(dbr);
        long rwqe = Dpa.ld64(c + C_WQ) + (long) (rpi & (1 << Dpa.ld32(c + C_LOG_RQ)) - 1) * RQ_STRIDE;
        FlexioDevQueue.rwqeSet(rwqe, (int) length, mmap, addr);
        FlexioDevQueue.rwqeSet(rwqe + FlexioDevQueue.SEG_SIZE, 0, INVALID_LKEY, 0);
        Dpa.memoryFence(Dpa.W, Dpa.W); // the WQE before the record
        FlexioDevQueue.dbrRqIncPi(dbr);
        Dpa.memoryWriteback();
        Dpa.objectLeave(rdma);
    }

    /**
     * {@code doca_dpa_dev_rdma_signal_set}: the remote sync event set to {@code count}, after the
     * connection's earlier operations (the same RC send queue executes in order): an ATOMIC WRITE
     * of the 8-byte value, flushed with every earlier post of the connection, no completion.
     */
    public static void signalSet(long rdma, int connectionId, long remoteSyncEvent, long count) {
        signal(rdma, connectionId, remoteSyncEvent, count, OPCODE_ATOMIC_WRITE);
    }

    /**
     * {@code doca_dpa_dev_rdma_signal_add}: {@code count} added atomically to the remote sync event,
     * after the connection's earlier operations: an RDMA fetch-and-add (the fetched value lands in
     * the context's scratch word), flushed with every earlier post, no completion.
     */
    public static void signalAdd(long rdma, int connectionId, long remoteSyncEvent, long count) {
        signal(rdma, connectionId, remoteSyncEvent, count, OPCODE_ATOMIC_FA);
    }

    private static void signal(long rdma, int id, long event, long count, int opcode) {
        long c = conn(rdma, id);
        Dpa.objectEnter(c);
        int qpn = Dpa.ld32(c + C_QPN);
        int pi = Dpa.ld32(c + C_SQ_PI);
        long sq = Dpa.ld64(c + C_WQ) + ((long) RQ_STRIDE << Dpa.ld32(c + C_LOG_RQ));
        long wqe = FlexioDevQueue.swqeAt(sq, pi, Dpa.ld32(c + C_LOG_SQ));
        boolean add = opcode == OPCODE_ATOMIC_FA;
        FlexioDevQueue.swqeSegCtrlSet(wqe, pi, qpn, 0, opcode, add ? 4 : 3, 0);
        FlexioDevQueue.swqeSegRdmaSet(wqe + FlexioDevQueue.SEG_SIZE, Dpa.ld32(event + REMOTE_EVENT_RKEY), Dpa.ld64(event + REMOTE_EVENT_ADDR));
        long atomic = wqe + 2 * FlexioDevQueue.SEG_SIZE; // swap_add then compare, big-endian
        Dpa.st64(atomic, Long.reverseBytes(count));
        Dpa.st64(atomic + 8, 0);
        if (add) {
            FlexioDevQueue.swqeSegMemPtrDataSet(atomic + FlexioDevQueue.SEG_SIZE, 8, Dpa.ld32(rdma + OFF_SCRATCH_KEY), Dpa.ld64(rdma + OFF_SCRATCH));
        }
        pi++;
        Dpa.st32(c + C_SQ_PI, pi);
        ringAndLeave(rdma, c, qpn, pi);
    }
}
