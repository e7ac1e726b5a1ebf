package org.peerdirect.hca.wire;

import java.util.SplittableRandom;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A link that misbehaves as configured, on the sending side (the host has no netem): each frame
 * is dropped, corrupted (one bit of its UDP payload flipped, so the receiver's ICRC check
 * catches it), duplicated, held back behind the next frame (reordered), or delayed, with
 * probabilities drawn from an RNG seeded by configuration, so a run is repeatable for one
 * sending thread. Frames not picked for a fault pass straight through.
 *
 * <p>Lock rules: {@code this} serialises the decisions and the held frame; the delayed sends
 * run on one timer thread, started with the first delayed frame and stopped by {@link #close}.
 */
public final class FaultyLink implements Link {

    /** The fault probabilities (0..1) and the delay. */
    public record Faults(double drop, double duplicate, double reorder, double corrupt, long delayMs, long seed) {
        public Faults {
            for (double p : new double[] {drop, duplicate, reorder, corrupt}) {
                if (!(p >= 0 && p <= 1)) {
                    throw new IllegalArgumentException("a fault probability must be 0..1, not " + p);
                }
            }
            if (delayMs < 0 || delayMs > 60_000) {
                throw new IllegalArgumentException("delay.ms must be 0..60000, not " + delayMs);
            }
        }

        public static final Faults NONE = new Faults(0, 0, 0, 0, 0, 1);

        public boolean any() {
            return drop > 0 || duplicate > 0 || reorder > 0 || corrupt > 0 || delayMs > 0;
        }
    }

    private final Link inner;
    private Faults faults;
    private SplittableRandom rng;
    /** Frames the faults still apply to; past them the link is clean ({@link #setFaults(Faults, long)}). */
    private long budget = Long.MAX_VALUE;
    private Frame held;
    private ScheduledThreadPoolExecutor timer;
    public final AtomicLong dropped = new AtomicLong();
    /** Of {@link #dropped}: RC SEND or RDMA WRITE FIRST and MIDDLE packets, whose loss the receiver sees as a gap (the next packet is out of sequence). */
    public final AtomicLong droppedFirstOrMiddle = new AtomicLong();
    public final AtomicLong duplicated = new AtomicLong();
    public final AtomicLong reordered = new AtomicLong();
    public final AtomicLong corrupted = new AtomicLong();
    public final AtomicLong delayed = new AtomicLong();

    /** RC SEND_FIRST, SEND_MIDDLE, RDMA_WRITE_FIRST, RDMA_WRITE_MIDDLE ({@code ib_pack.h}). */
    private static boolean isFirstOrMiddle(int opcode) {
        return opcode == 0x00 || opcode == 0x01 || opcode == 0x06 || opcode == 0x07;
    }

    public FaultyLink(Link inner, Faults faults) {
        this.inner = inner;
        this.faults = faults;
        this.rng = new SplittableRandom(faults.seed());
    }

    /** From now on the link misbehaves as {@code f} says (its RNG seeded anew): a test's next case on the same link. */
    public synchronized void setFaults(Faults f) {
        setFaults(f, Long.MAX_VALUE);
    }

    /**
     * As {@link #setFaults(Faults)} for the next {@code frames} frames only; then the link is clean.
     * A run whose last frames must arrive uses it: a tool that destroys its QP right after its last
     * completion (rc_pingpong, perftest) never sees the peer's retry of an ACK lost at the very end,
     * and a peer with retry_cnt 7 retries forever (as two real hosts would).
     */
    public synchronized void setFaults(Faults f, long frames) {
        if (frames < 0) {
            throw new IllegalArgumentException("a fault budget of " + frames + " frames");
        }
        faults = java.util.Objects.requireNonNull(f);
        rng = new SplittableRandom(f.seed());
        budget = frames;
    }

    @Override
    public void start(Receiver r) {
        inner.start(r);
    }

    @Override
    public synchronized boolean send(Frame f) {
        if (budget != Long.MAX_VALUE && budget-- <= 0) {
            faults = Faults.NONE;
            budget = Long.MAX_VALUE;
        }
        if (rng.nextDouble() < faults.drop()) {
            dropped.incrementAndGet();
            if (f.len > RxeNet.BTH && isFirstOrMiddle(f.seg.get(java.lang.foreign.ValueLayout.JAVA_BYTE, RxeNet.BTH) & 0xff)) {
                droppedFirstOrMiddle.incrementAndGet();
            }
            return true;
        }
        Frame out = f;
        boolean sent = true;
        if (rng.nextDouble() < faults.corrupt() && f.len > RxeNet.BTH) {
            out = copy(f);
            int at = RxeNet.BTH + rng.nextInt(f.len - RxeNet.BTH);
            out.seg.set(java.lang.foreign.ValueLayout.JAVA_BYTE, at, (byte) (out.seg.get(java.lang.foreign.ValueLayout.JAVA_BYTE, at) ^ 1 << rng.nextInt(8)));
            corrupted.incrementAndGet();
        }
        boolean dup = rng.nextDouble() < faults.duplicate();
        if (held == null && rng.nextDouble() < faults.reorder()) {
            held = out == f ? copy(f) : out;
            reordered.incrementAndGet();
            Frame h = held;
            later(() -> flushHeld(h), 2);
            return true;
        }
        if (faults.delayMs() > 0) {
            Frame d = out == f ? copy(f) : out;
            delayed.incrementAndGet();
            later(() -> inner.send(d), faults.delayMs());
            if (dup) {
                Frame d2 = copy(d);
                duplicated.incrementAndGet();
                later(() -> inner.send(d2), faults.delayMs());
            }
        } else {
            sent = inner.send(out);
            if (dup) {
                duplicated.incrementAndGet();
                inner.send(out);
            }
        }
        if (held != null) {
            Frame h = held;
            held = null;
            inner.send(h); // after the frame that overtook it
        }
        return sent;
    }

    /** The held frame leaves on its own when nothing overtook it soon. */
    private synchronized void flushHeld(Frame h) {
        if (held == h) {
            held = null;
            inner.send(h);
        }
    }

    private void later(Runnable r, long ms) {
        if (timer == null) {
            timer = new ScheduledThreadPoolExecutor(1, t -> {
                Thread th = new Thread(t, "wire-faults");
                th.setDaemon(true);
                return th;
            });
            timer.setRemoveOnCancelPolicy(true);
        }
        timer.schedule(r, ms, TimeUnit.MILLISECONDS);
    }

    private static Frame copy(Frame f) {
        Frame c = new Frame();
        c.copyFrom(f);
        return c;
    }

    @Override
    public java.net.InetSocketAddress localEnd() {
        return inner.localEnd();
    }

    @Override
    public java.net.InetSocketAddress remoteEnd() {
        return inner.remoteEnd();
    }

    @Override
    public synchronized String describe() {
        return inner.describe() + " faults(drop=" + faults.drop() + " duplicate=" + faults.duplicate() + " reorder=" + faults.reorder()
                + " corrupt=" + faults.corrupt() + " delay.ms=" + faults.delayMs() + " seed=" + faults.seed() + ")";
    }

    @Override
    public long lost() {
        return inner.lost() + dropped.get();
    }

    @Override
    public void close() {
        ScheduledThreadPoolExecutor t;
        synchronized (this) {
            t = timer;
            timer = null;
            held = null;
        }
        if (t != null) {
            t.shutdownNow();
        }
        inner.close();
    }
}
