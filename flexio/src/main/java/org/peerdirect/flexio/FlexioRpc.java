package org.peerdirect.flexio;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

import org.peerdirect.flexio.impl.Loopback;
import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * The host half of {@code flexio_process_call} ([model], DPA_MODEL.md §2.5; the device half is
 * flexio-dev's {@code FlexioDevRpc}): made at a process's first call, it holds the RPC handler's
 * thread, its CQ (element DPA_THREAD, ring in the heap), an outbox, a window and the host mailbox
 * the handler writes through it, and an RC QP looped to itself whose receive queue completes on
 * that CQ. A call is then data path only: one RDMA WRITE-with-immediate carries the packed
 * arguments into the argument buffer and, by its receive CQE, triggers the handler; the host
 * polls the mailbox's sequence word in its own memory. No firmware command runs per call, except
 * a query of the process's status when the answer is slow (every {@link #STATUS_EVERY_NANOS}), so
 * a process that ended during the call is reported, not waited for.
 *
 * <p>The layout both halves agree on (the context words, the immediate, the mailbox) is repeated
 * here, as a C header shared by libflexio and libflexio_dev would be: the host library does not
 * link the device library. A channel whose making failed half-way leaves its objects to the
 * process's teardown, and the next call makes a new one.
 *
 * <p>Guarded by the process's lock ({@link #create} and {@link #call} assert it).
 */
final class FlexioRpc {

    /** flexio-dev's {@code FlexioDevRpc}: its entry's symbol, context words, CQ depth and mailbox words. */
    static final String SYMBOL = "flexio_dev_rpc_handler";
    static final int OUTBOX = 0, CQN = 8, CQ_RING = 16, CQ_DBR = 24, WINDOW = 32, MKEY = 40, MAILBOX = 48, CI = 56, ARGBUF = 64;
    static final int LOG_CQ = 2;
    static final int MAILBOX_RESULT = 0, MAILBOX_SEQ = 8;

    /** How often a slow call queries the process's status (a firmware command) while it polls. */
    static final long STATUS_EVERY_NANOS = 2_000_000;
    private static final int MAILBOX_BYTES = 4096;

    private final FlexioProcess p;
    private final long ctxDaddr;
    private final int argbufSize;
    private final FlexioEventHandler handler;
    private final AddressSpace proc;
    private final long mailboxVa;
    private final Loopback link;
    private final int heapRkey;
    private int seq;
    /** A WRITE-with-immediate whose completion is not reaped yet (its call failed while waiting). */
    private boolean pending;
    /** Status queries slow answers cost (firmware commands), for the tests' command count. */
    long statusQueries;

    private FlexioRpc(FlexioProcess p, long ctxDaddr, int argbufSize, FlexioEventHandler handler, long mailboxVa, Loopback link,
            int heapRkey) {
        this.p = p;
        this.ctxDaddr = ctxDaddr;
        this.argbufSize = argbufSize;
        this.handler = handler;
        this.proc = p.ctx.process();
        this.mailboxVa = mailboxVa;
        this.link = link;
        this.heapRkey = heapRkey;
    }

    /**
     * Builds the channel; each object joins the process's teardown (newest first, so the QP goes
     * before its CQ, the mkey before the mailbox's memory, the CQ before the thread).
     *
     * @throws FlexioException FAILED when the image lacks {@value #SYMBOL} (flexio-dev not linked) or the heap has no room
     */
    static FlexioRpc create(FlexioProcess p, int heapRkey) {
        assert p.lock.isHeldByCurrentThread();
        int index = p.symbols.indexOf(SYMBOL);
        if (index < 0) {
            throw new FlexioException(FlexioStatus.FAILED, "app " + p.app.name() + "'s image has no " + SYMBOL
                    + " (flexio-dev's RPC handler): link flexio-dev into the image (dpacc does)");
        }
        int argbuf = 8;
        for (FlexioFunc f : p.app.funcs()) {
            if (f.kind() == FlexioFunc.Kind.RPC) {
                argbuf = Math.max(argbuf, f.argbufSize());
            }
        }
        argbuf = (argbuf + 7) & ~7;
        long ctx = alloc(p, ARGBUF + argbuf);
        long ring = alloc(p, (long) Cq.CQE_SIZE << LOG_CQ);
        long dbr = alloc(p, 64);
        byte[] cqes = new byte[Cq.CQE_SIZE << LOG_CQ];
        for (int i = 0; i < 1 << LOG_CQ; i++) {
            cqes[i * Cq.CQE_SIZE + (int) Cq.CQE_OP_OWN] = (byte) (Cq.CQE_INVALID << 4 | 1);
        }
        p.host2devMemcpy(cqes, ring);
        FlexioEventHandler h = FlexioEventHandler.runtime(p, index, ctx);
        FlexioCq cq = FlexioCq.create(p, new FlexioCq.Attr(LOG_CQ, FlexioCq.ElementType.DPA_THREAD, h, ring, dbr));
        FlexioOutbox outbox = FlexioOutbox.create(p);
        FlexioWindow window = FlexioWindow.create(p, p.pdn());
        AddressSpace proc = p.ctx.process();
        long va = proc.mmap(MAILBOX_BYTES);
        p.own(() -> proc.munmap(va, MAILBOX_BYTES)); // after the mkey over it (newer, so destroyed first)
        proc.populate(va, MAILBOX_BYTES, true);
        FlexioMkey mkey = FlexioMkey.hostMkeyCreate(p, va, MAILBOX_BYTES);
        ByteBuffer c = ByteBuffer.allocate(ARGBUF).order(ByteOrder.LITTLE_ENDIAN);
        c.putLong(OUTBOX, outbox.id()).putLong(CQN, cq.cqNum()).putLong(CQ_RING, ring)
                .putLong(CQ_DBR, dbr).putLong(WINDOW, window.id()).putLong(MKEY, mkey.id())
                .putLong(MAILBOX, va).putLong(CI, 0);
        p.host2devMemcpy(c.array(), ctx);
        Loopback link = new Loopback(p.ctx, p.pdn(), p.uar(), p.attr.timeout(), cq.cqNum());
        p.own(link::close);
        h.run();
        return new FlexioRpc(p, ctx, argbuf, h, va, link, heapRkey);
    }

    private static long alloc(FlexioProcess p, long size) {
        long d = p.bufDevAlloc(size);
        if (d == 0) {
            throw new FlexioException(FlexioStatus.FAILED, "no heap for flexio_process_call's channel (" + size + " bytes)");
        }
        return d;
    }

    /**
     * One call of the entry at symbol {@code index}: the WRITE-with-immediate posted, the mailbox
     * polled, then the send's completion reaped (the two waits overlap: the requester's completion
     * needs no DPA work).
     *
     * @throws FlexioException FAILED when the process ended during the call, TIMEOUT
     */
    long call(int index, byte[] args, String name) {
        assert p.lock.isHeldByCurrentThread();
        if (args.length > argbufSize) {
            throw new FlexioException(FlexioStatus.FAILED, name + " packs " + args.length + " bytes, more than its registered "
                    + argbufSize);
        }
        if (pending) { // an earlier call ended with an error before it reaped its send
            link.reapWriteImm();
            pending = false;
        }
        seq = (seq + 1) & 0xffff;
        if (seq == 0) {
            seq = 1; // 0 is the mailbox's initial word, never an answer
        }
        link.postWriteImm(args.length == 0 ? new byte[8] : Arrays.copyOf(args, Math.max(8, args.length)), ctxDaddr
                + ARGBUF, heapRkey, seq << 16 | index);
        pending = true;
        long r = awaitMailbox(name);
        link.reapWriteImm(); // as a rule complete by now: the answer came after the write landed
        pending = false;
        return r;
    }

    /**
     * One look at the mailbox through {@code word} (its 8-byte word at an offset): the result of call
     * {@code seq} as a one-element array, or null while the mailbox holds another call's answer.
     * The sequence word first, then the result: the handler's window write-back lands the result
     * before the sequence (its window fence), so a sequence that matches means the result is there.
     * Read the other way round (or as one 16-byte copy, result first), a poll between the two
     * writes reads the old result with the new sequence: the previous call's answer (CI:
     * {@code DocaDpaResourcesTest} saw thread 2's rank as its thread count).
     */
    static long[] answer(java.util.function.LongUnaryOperator word, int seq) {
        if (word.applyAsLong(MAILBOX_SEQ) != seq) {
            return null;
        }
        java.lang.invoke.VarHandle.acquireFence(); // the result read after the sequence word
        return new long[] {word.applyAsLong(MAILBOX_RESULT)};
    }

    /** Polls the mailbox until it answers this call's sequence number; bounded by the process's timeout. */
    private long awaitMailbox(String name) {
        byte[] b = new byte[8];
        long start = System.nanoTime();
        long deadline = start + p.attr.timeout().toNanos();
        long nextStatus = start + STATUS_EVERY_NANOS;
        java.util.function.LongUnaryOperator word = off -> {
            proc.read(mailboxVa + off, b, 0, 8);
            return ByteBuffer.wrap(b, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        };
        while (true) {
            long[] r = answer(word, seq);
            if (r != null) {
                return r[0];
            }
            long now = System.nanoTime();
            if (now > nextStatus) {
                nextStatus = now + STATUS_EVERY_NANOS;
                statusQueries++;
                int status = p.processStatus();
                if (status != 0) {
                    throw new FlexioException(FlexioStatus.FAILED, String.format("the DPA process ended during %s with status 0x%x"
                            + " (flexio_err_status %d)", name, status, FlexioStatus.errStatusOf(status)));
                }
            }
            if (now > deadline) {
                throw new FlexioException(FlexioStatus.TIMEOUT, name + " did not answer in its mailbox within "
                        + p.attr.timeout().toMillis() + " ms (the RPC handler's window write-back missing? dpa:mm says)");
            }
            Thread.onSpinWait();
            Thread.yield(); // a poll on 2 cores: let the DPA's carrier run, not a synchronisation
        }
    }

    /** The RPC handler's line for {@code flexio_crash_data}. */
    String describe() {
        return handler.describeLine(SYMBOL + " (rpc)");
    }
}
