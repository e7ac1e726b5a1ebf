package org.peerdirect.mlx4.core;

import java.util.ArrayDeque;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The driver's side of the HCR ({@code cmd.c}): {@code mlx4_cmd_post} writes the parameters and
 * then the go word with the toggle bit; polling mode ({@code mlx4_cmd_poll}) reads the status
 * dword until the go bit clears and the toggle moved, one command at a time; event mode
 * ({@code mlx4_cmd_wait}) posts with the event bit and a token and sleeps until the EQ handler
 * delivers the command-completion EQE ({@link #event}), up to {@code max_cmds} at once. A status
 * dword of all ones is a device that left the bus (every command then fails at once with EIO).
 *
 * <p>Lock rules: {@link #hcrLock} ({@code hcr_mutex}) guards the HCR writes and {@link #toggle};
 * {@link #pollLock} ({@code poll_sem}) lets one polled command run; in event mode {@link #slots}
 * counts free contexts and each {@link Context} is waited on through its monitor.
 */
public final class Cmd {

    /** One outstanding event-mode command ({@code struct mlx4_cmd_context}). */
    private static final class Context {
        final int index;
        int token;
        boolean done;
        int status;
        long out;

        Context(int index) {
            this.index = index;
        }
    }

    private final String name;
    private final PciFunction fn;
    private final long timeoutNanos;
    private final ReentrantLock hcrLock = new ReentrantLock();
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Guarded by hcrLock: the toggle the next post writes. */
    private int toggle = 1;
    private volatile boolean events;
    private volatile boolean gone;
    private Semaphore slots = new Semaphore(0);
    private Context[] contexts = new Context[0];
    /** Free contexts; guarded by itself. */
    private final ArrayDeque<Context> free = new ArrayDeque<>();
    private int tokenMask;
    final CmdLog log;
    /** Completion events whose token named no outstanding command (stale or wrong). */
    final AtomicLong strayEvents = new AtomicLong();

    public Cmd(String name, PciFunction fn, long timeoutNanos) {
        this.name = name;
        this.log = new CmdLog(256, name);
        this.fn = fn;
        this.timeoutNanos = timeoutNanos;
    }

    public CmdLog log() {
        return log;
    }

    public boolean eventMode() {
        return events;
    }

    /** True once the device was found gone (all ones) or reset: commands fail at once. */
    public boolean gone() {
        return gone;
    }

    /** {@code mlx4_cmd_imm}: the immediate output parameter. */
    public long imm(long inParam, int inMod, int opMod, int op) {
        return exec(inParam, 0, inMod, opMod, op, true);
    }

    /** {@code mlx4_cmd}: no output. */
    public void cmd(long inParam, int inMod, int opMod, int op) {
        exec(inParam, 0, inMod, opMod, op, false);
    }

    /** {@code mlx4_cmd_box}: input and output mailboxes (bus addresses; 0 when there is none). */
    public void box(long inParam, long outParam, int inMod, int opMod, int op) {
        exec(inParam, outParam, inMod, opMod, op, false);
    }

    private long exec(long inParam, long outParam, int inMod, int opMod, int op, boolean outIsImm) {
        if (gone) {
            log.add(op, opMod, inMod, events, -1, 0, "not sent: the device is gone");
            throw new KernelException(Errno.EIO, name + ": " + org.peerdirect.hca.cx3.ifc.Mlx4Cmd.name(op) + ": the device is gone");
        }
        long t0 = System.nanoTime();
        boolean ev = events;
        long[] result;
        try {
            result = ev ? wait(inParam, outParam, inMod, opMod, op) : poll(inParam, outParam, inMod, opMod, op);
        } catch (KernelException e) {
            log.add(op, opMod, inMod, ev, -1, System.nanoTime() - t0, e.getMessage());
            throw e;
        }
        int status = (int) result[0];
        log.add(op, opMod, inMod, ev, status, System.nanoTime() - t0, null);
        if (status != 0) {
            throw new Mlx4CmdException(name, op, status);
        }
        return outIsImm ? result[1] : 0;
    }

    private boolean pending(int word) {
        return Hcr.go(word) || Hcr.toggle(word) == toggle;
    }

    private int status() {
        int w = fn.read32be(0, Hcr.BASE + Hcr.STATUS);
        if (w == -1) {
            gone = true; // a read of all ones: the device left the bus
            throw new KernelException(Errno.EIO, name + ": the HCR reads all ones: the device is gone (hot-unplug)");
        }
        return w;
    }

    /** Waits, polling, while {@link #pending}; the caller holds hcrLock or pollLock. */
    private int waitNotPending(long deadline, String what) {
        int spins = 0;
        for (;;) {
            int w = status();
            if (!pending(w)) {
                return w;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new KernelException(Errno.EIO, name + ": " + what + " timed out after " + timeoutNanos / 1_000_000 + " ms");
            }
            if (++spins < 2000) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(20_000); // a register poll's back-off, as the kernel's cond_resched
            }
        }
    }

    /** {@code mlx4_cmd_post}: the parameters, then the go word; the toggle moves. */
    private void post(long inParam, long outParam, int inMod, int opMod, int op, int token, boolean event) {
        hcrLock.lock();
        try {
            String what = org.peerdirect.hca.cx3.ifc.Mlx4Cmd.name(op) + " waiting for the HCR";
            waitNotPending(System.nanoTime() + timeoutNanos, what);
            long b = Hcr.BASE;
            fn.write32be(0, b + Hcr.IN_PARAM, (int) (inParam >>> 32));
            fn.write32be(0, b + Hcr.IN_PARAM + 4, (int) inParam);
            fn.write32be(0, b + Hcr.IN_MODIFIER, inMod);
            fn.write32be(0, b + Hcr.OUT_PARAM, (int) (outParam >>> 32));
            fn.write32be(0, b + Hcr.OUT_PARAM + 4, (int) outParam);
            fn.write32be(0, b + Hcr.TOKEN, token << 16);
            fn.write32be(0, b + Hcr.STATUS, Hcr.goWord(op, opMod, event, toggle));
            toggle ^= 1;
        } finally {
            hcrLock.unlock();
        }
    }

    /** {@code mlx4_cmd_poll}. */
    private long[] poll(long inParam, long outParam, int inMod, int opMod, int op) {
        pollLock.lock();
        try {
            post(inParam, outParam, inMod, opMod, op, Hcr.POLL_TOKEN, false);
            int w = waitNotPending(System.nanoTime() + timeoutNanos, org.peerdirect.hca.cx3.ifc.Mlx4Cmd.name(op));
            long out = (long) fn.read32be(0, Hcr.BASE + Hcr.OUT_PARAM) << 32 | fn.read32be(0, Hcr.BASE + Hcr.OUT_PARAM + 4) & 0xffff_ffffL;
            return new long[] {Hcr.status(w), out};
        } finally {
            pollLock.unlock();
        }
    }

    /**
     * {@code mlx4_cmd_wait}: a context and its token, the post with the event bit, then sleep until
     * {@link #event}. Not interruptible (as {@code wait_for_completion_timeout}): a command the
     * device may run must not be forgotten by the driver; an interrupt is kept for the caller.
     */
    private long[] wait(long inParam, long outParam, int inMod, int opMod, int op) {
        boolean interrupted = false;
        Semaphore s = slots;
        long deadline = System.nanoTime() + timeoutNanos;
        for (;;) {
            try {
                if (!s.tryAcquire(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    throw new KernelException(Errno.EIO, name + ": no command context free within the timeout");
                }
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        Context c;
        synchronized (free) {
            c = free.poll();
        }
        try {
            int token;
            synchronized (c) {
                c.token = c.token + tokenMask + 1 & 0xffff; // a new token per use: a late event of the last use is stale
                c.done = false;
                token = c.token;
            }
            post(inParam, outParam, inMod, opMod, op, token, true);
            deadline = System.nanoTime() + timeoutNanos;
            synchronized (c) {
                while (!c.done) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0 || gone) {
                        throw new KernelException(Errno.EIO, name + ": " + org.peerdirect.hca.cx3.ifc.Mlx4Cmd.name(op)
                                + (gone ? ": the device is gone" : " timed out after " + timeoutNanos / 1_000_000 + " ms (no completion event)"));
                    }
                    try {
                        c.wait(left / 1_000_000, (int) (left % 1_000_000));
                    } catch (InterruptedException e) {
                        interrupted = true;
                    }
                }
                return new long[] {c.status, c.out};
            }
        } finally {
            synchronized (free) {
                free.push(c);
            }
            s.release();
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** {@code mlx4_cmd_event}: the EQ handler's command-completion EQE; a token no command waits for is counted and dropped. */
    public void event(int token, int status, long out) {
        Context[] cs = contexts;
        if (cs.length == 0) {
            strayEvents.incrementAndGet();
            return;
        }
        Context c = cs[token & tokenMask];
        synchronized (c) {
            if (c.token != token || c.done) {
                strayEvents.incrementAndGet();
                return;
            }
            c.status = status;
            c.out = out;
            c.done = true;
            c.notifyAll();
        }
    }

    /** {@code mlx4_cmd_use_events}: up to {@code maxCmds} (a power of two) commands at once, completed by EQEs. */
    public void useEvents(int maxCmds) {
        pollLock.lock();
        try {
            Context[] cs = new Context[maxCmds];
            for (int i = 0; i < maxCmds; i++) {
                cs[i] = new Context(i);
                cs[i].token = i;
            }
            tokenMask = maxCmds - 1;
            synchronized (free) {
                free.clear();
                for (Context c : cs) {
                    free.add(c);
                }
            }
            contexts = cs;
            slots = new Semaphore(maxCmds);
            events = true;
        } finally {
            pollLock.unlock();
        }
    }

    /** {@code mlx4_cmd_use_polling}: waits for the event-mode commands in flight, then polls. */
    public void usePolling() {
        if (!events) {
            return;
        }
        Semaphore s = slots;
        int n = contexts.length;
        s.acquireUninterruptibly(n);
        events = false;
        contexts = new Context[0];
        s.release(n);
    }

    /** The device is gone or was reset: every waiter wakes up with EIO, later commands fail at once. */
    public void markGone() {
        gone = true;
        for (Context c : contexts) {
            synchronized (c) {
                c.notifyAll();
            }
        }
    }
}
