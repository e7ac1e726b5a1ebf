package org.peerdirect.hca.cx4;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@link DpaQueueTest}: an echo server whose CQ ring, RC QP rings, doorbell records
 * and buffers all live in its process heap (the DUMEM), written as a FlexIO event handler with the
 * {@code flexio_dev} queue calls spelled over the ISA. mlx5 descriptors are big-endian and DPA
 * memory little-endian: every descriptor field is byte-swapped.
 *
 * <p>Heap layout (offsets from the heap base, which is at {@link #BASE} of the argument block):
 * the argument block at 0, the CQ ring ({@link #RING_CQES} CQEs) at {@link #CQ}, the receive queue
 * ({@link #QUEUE} WQEs of 64 bytes) then the send queue ({@link #QUEUE} basic blocks) at
 * {@link #WQ}, the CQ's doorbell record at {@link #DBR} and the QP's 64 bytes after, receive
 * buffers at {@link #RBUF} and send buffers at {@link #SBUF} ({@link #MSG} bytes each).
 */
public final class DpaQueueProgs {

    static final int CQ_DB = 0x100;
    static final int SXD_DB = 0x1c0;
    static final long CQ = 0x1000;
    static final long WQ = 0x2000;
    static final long DBR = 0x3000;
    static final long RBUF = 0x4000;
    static final long SBUF = 0x5000;
    static final int RING_CQES = 64;
    static final int QUEUE = 16;
    static final int LOG_QUEUE = 4;
    static final int MSG = 64;

    // the argument block (64-bit words)
    static final int OUTBOX = 0;
    static final int CQN = 8;
    static final int QPN = 16;
    static final int LKEY = 24;
    static final int ACTIVATIONS = 32;
    static final int CI = 40;
    static final int PI = 48;
    static final int RQ_POSTED = 56;
    static final int ECHOED = 64;
    static final int READY = 72;
    static final int BASE = 80;
    static final int RQ_DONE = 88;

    private DpaQueueProgs() {
    }

    /**
     * The echo handler. First activation: the ring's CQEs invalid, every receive posted, the CQ
     * armed. Each activation: every CQE of this pass over the ring consumed; a received message
     * is copied to a send buffer and sent back (SEND WQE in DPA memory, written back, then
     * {@code SXD_DB} with the producer index), its receive posted again (WQE, W→W fence,
     * record); then the CQ's consumer index recorded, written back, the CQ armed with it, and
     * the handler reschedules. A CQE landing after the last poll and before the arm fires the arm
     * at once: nothing is lost.
     */
    public static void echo(long arg) {
        serve(arg, true, true);
    }

    /** {@link #echo} without the write-back before the doorbells: the NIC fetches WQEs it cannot see (the memory model's C1). */
    public static void echoWithoutWriteback(long arg) {
        serve(arg, false, true);
    }

    /** {@link #echo} posting receives without the W→W fence between WQE and record: the NIC may take a WQE older than the record (C6). */
    public static void echoWithoutFence(long arg) {
        serve(arg, true, false);
    }

    private static void serve(long arg, boolean writeback, boolean fence) {
        if (Dpa.outboxConfig((int) Dpa.ld64(arg + OUTBOX)) != 0) {
            Dpa.error(0x81);
        }
        Dpa.amoAdd64(arg + ACTIVATIONS, 1);
        long base = Dpa.ld64(arg + BASE);
        if (Dpa.ld64(arg + READY) == 0) {
            setup(arg, base, fence);
        }
        long ci = Dpa.ld64(arg + CI);
        long pi = Dpa.ld64(arg + PI);
        long sent = pi;
        for (;;) {
            long cqe = base + CQ + (ci & RING_CQES - 1) * 64;
            int opOwn = Dpa.ld8(cqe + 63);
            if (opOwn >>> 4 == 0xf || (opOwn & 1) != (ci / RING_CQES & 1)) {
                break;
            }
            int op = opOwn >>> 4;
            if (op == 2) { // a SEND received
                pi = echoOne(arg, base, pi, Integer.reverseBytes(Dpa.ld32(cqe + 0x2c)), fence);
            } else if (op != 0) { // neither a send's completion: an error CQE
                Dpa.error(0x83);
            }
            ci++;
        }
        Dpa.st32(base + DBR, Integer.reverseBytes((int) (ci & 0xffffff))); // the CQ's set_ci record
        Dpa.st64(arg + CI, ci);
        Dpa.st64(arg + PI, pi);
        if (writeback) {
            Dpa.memoryWriteback(); // the WQEs, records and counters, before the doorbells make the NIC read them
        }
        if (pi != sent) {
            Dpa.st64(Dpa.threadCtx().outboxBase() + SXD_DB, (pi & 0xffff) | (Dpa.ld64(arg + QPN) & 0xffffff) << 32);
        }
        Dpa.st64(Dpa.threadCtx().outboxBase() + CQ_DB, (Dpa.ld64(arg + CQN) & 0xffffff) | (ci & 0xffffff) << 32);
        Dpa.reschedule();
    }

    /** Copies the message of receive {@code RQ_DONE} to send buffer {@code pi}, puts its SEND, posts the receive again; the new pi. */
    private static long echoOne(long arg, long base, long pi, int len, boolean fence) {
        long done = Dpa.ld64(arg + RQ_DONE);
        long src = base + RBUF + (done & QUEUE - 1) * MSG;
        long dst = base + SBUF + (pi & QUEUE - 1) * MSG;
        for (int i = 0; i < len; i += 8) {
            Dpa.st64(dst + i, Dpa.ld64(src + i));
        }
        long w = base + WQ + (long) QUEUE * 64 + (pi & QUEUE - 1) * 64;
        Dpa.st32(w, Integer.reverseBytes((int) (pi & 0xffff) << 8 | 0x0a)); // opmod_idx_opcode: SEND
        Dpa.st32(w + 4, Integer.reverseBytes((int) Dpa.ld64(arg + QPN) << 8 | 2)); // qpn_ds: ctrl + one data segment
        Dpa.st32(w + 8, Integer.reverseBytes(2 << 2)); // fm_ce_se: CQ update
        Dpa.st32(w + 12, 0);
        Dpa.st32(w + 16, Integer.reverseBytes(len));
        Dpa.st32(w + 20, Integer.reverseBytes((int) Dpa.ld64(arg + LKEY)));
        Dpa.st64(w + 24, Long.reverseBytes(dst));
        Dpa.st64(arg + RQ_DONE, done + 1);
        Dpa.amoAdd64(arg + ECHOED, 1);
        postReceive(arg, base, fence);
        return pi + 1;
    }

    /** {@code flexio_dev}'s receive pattern: the WQE, {@code memory_fence(W, W)}, the record. */
    private static void postReceive(long arg, long base, boolean fence) {
        long n = Dpa.ld64(arg + RQ_POSTED);
        long r = base + WQ + (n & QUEUE - 1) * 64;
        Dpa.st32(r, Integer.reverseBytes(MSG));
        Dpa.st32(r + 4, Integer.reverseBytes((int) Dpa.ld64(arg + LKEY)));
        Dpa.st64(r + 8, Long.reverseBytes(base + RBUF + (n & QUEUE - 1) * MSG));
        Dpa.st32(r + 16 + 4, Integer.reverseBytes(0x100)); // INVALID_LKEY ends the scatter list
        Dpa.st64(arg + RQ_POSTED, n + 1);
        if (fence) {
            Dpa.memoryFence(Dpa.W, Dpa.W);
        }
        Dpa.st32(base + DBR + 64, Integer.reverseBytes((int) (n + 1 & 0xffff))); // the QP record's receive counter
    }

    /**
     * Stores {@link #READY} and, before writing it back, counts itself in {@link #ACTIVATIONS}
     * (an atomic: at memory) and waits for the host's go ({@link #BASE}, written by the NIC): a
     * host polling {@code READY} meanwhile reads a word still dirty in this EU's write buffer.
     */
    public static void storeThenWait(long arg) {
        Dpa.st64(arg + READY, 1);
        Dpa.amoAdd64(arg + ACTIVATIONS, 1);
        while (Dpa.ld64(arg + BASE) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.memoryWriteback();
        Dpa.finish();
    }

    /** The ring's CQEs invalid (owner 1: not this first pass), every receive posted, written back. */
    private static void setup(long arg, long base, boolean fence) {
        for (int i = 0; i < RING_CQES; i++) {
            Dpa.st8(base + CQ + i * 64L + 63, 0xf1);
        }
        for (int i = 0; i < QUEUE; i++) {
            postReceive(arg, base, fence);
        }
        Dpa.st64(arg + READY, 1);
        Dpa.memoryWriteback();
    }
}
