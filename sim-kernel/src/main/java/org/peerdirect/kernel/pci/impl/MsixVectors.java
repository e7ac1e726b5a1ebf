package org.peerdirect.kernel.pci.impl;

import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

import org.peerdirect.kernel.pci.IrqHandler;

/**
 * The MSI-X vectors of one function: the table entries with their pending bits, and one handler
 * thread per requested vector ({@code irq/<vector>-<bdf>}, as a threaded IRQ's kthread), so
 * vectors are handled concurrently and a handler never runs on the thread that raised it.
 *
 * <h2>Invariants and lock rules</h2>
 * <ul>
 * <li>Each vector's fields are guarded by the {@link Vector}'s monitor; no user code (handlers)
 * runs under it.</li>
 * <li>A vector has at most one {@link IrqThread}, the one in {@code vector.thread}; a thread that
 * finds itself no longer there exits, so freeing a vector is "detach under the monitor, then join
 * outside it".</li>
 * <li>{@link #requestIrq} and {@link #raise} check {@code present} under the monitor; the function
 * makes {@code present} false before it calls {@link #sweep}, so no thread is started and no raise
 * counted after the sweep. {@code live} holds every started thread until it ends, and the sweep
 * waits for all of them.</li>
 * </ul>
 *
 * @see "pci_alloc_irq_vectors() in drivers/pci/msi/msi.c, request_threaded_irq() and free_irq() in kernel/irq/manage.c"
 */
final class MsixVectors {
    private static final long REPORT_EVERY_MS = 5_000;

    private final String bdf;
    private final Vector[] vectors;
    private final BooleanSupplier present;
    private final Consumer<String> warn;
    /**
     * Every started IRQ thread not yet seen dead (including one that freed its own vector and is
     * finishing its handler): a thread is only dropped from here once {@code isAlive()} is false.
     */
    private final Set<IrqThread> live = ConcurrentHashMap.newKeySet();

    MsixVectors(String bdf, int count, BooleanSupplier present, Consumer<String> warn) {
        this.bdf = bdf;
        this.present = present;
        this.warn = warn;
        vectors = new Vector[count];
        for (int i = 0; i < count; i++) {
            vectors[i] = new Vector(i);
        }
    }

    int count() {
        return vectors.length;
    }

    /** True for a handler thread of these vectors (which a removal must not wait for from itself). */
    boolean isHandlerThread(Thread t) {
        return t instanceof IrqThread it && it.owner() == this;
    }

    /**
     * At removal: clears every pending bit, frees every handler and waits for every handler thread
     * started before to end (except the calling thread, if it is one).
     */
    void sweep() {
        for (Vector v : vectors) {
            synchronized (v) {
                v.pending = false;
            }
            detach(v);
        }
        // every thread started before the sweep is in live (added under the vector's monitor)
        List.copyOf(live).forEach(this::awaitEnd);
    }

    /** One MSI-X table entry plus its PBA bit; every field is guarded by the Vector's monitor. */
    private static final class Vector {
        final int index;
        long raised;
        long delivered;
        /** PBA bit: raised while no handler was requested. */
        boolean pending;
        /** Sent to the handler thread, not yet picked up (further raises coalesce into it). */
        boolean signalled;
        /** The requested handler's thread; null while the vector is free. */
        IrqThread thread;

        Vector(int index) {
            this.index = index;
        }
    }

    /** The handler thread of one requested vector: {@code irq/<vector>-<bdf>}, like a threaded IRQ's kthread. */
    private final class IrqThread extends Thread {
        private final Vector v;
        private final IrqHandler handler;

        IrqThread(Vector v, IrqHandler handler) {
            super("irq/" + v.index + "-" + bdf);
            this.v = v;
            this.handler = handler;
            setDaemon(true); // never keeps a JVM alive; freeIrq/remove end it anyway
        }

                MsixVectors owner() {
            return MsixVectors.this;
        }

        @Override
        public void run() {
            for (;;) {
                synchronized (v) {
                    while (v.thread == this && !v.signalled) {
                        try {
                            v.wait();
                        } catch (InterruptedException e) {
                            // nobody but freeIrq ends this thread, and it does so through v.thread
                        }
                    }
                    if (v.thread != this) {
                        return; // freed: never call the handler again
                    }
                    v.signalled = false;
                    v.delivered++;
                }
                try {
                    handler.handle(v.index);
                } catch (RuntimeException | Error e) {
                    warn.accept("pci " + bdf + ": handler of MSI-X vector " + v.index + " failed: " + e);
                }
            }
        }
    }

    private Vector vector(int vector) {
        if (vector < 0 || vector >= vectors.length) {
            throw new IllegalArgumentException("vector " + vector + ": out of range, " + bdf + " has "
                    + vectors.length + " MSI-X vectors" + (vectors.length == 0 ? "" : " (0.." + (vectors.length - 1) + ")"));
        }
        return vectors[vector];
    }

    void requestIrq(int vector, IrqHandler handler) {
        Vector v = vector(vector);
        Objects.requireNonNull(handler, "handler");
        synchronized (v) {
            if (!present.getAsBoolean()) {
                return; // remove() has swept, or will not see, this vector: starting a thread would leak it
            }
            if (v.thread != null) {
                throw new IllegalStateException("vector " + vector + " of " + bdf + " already has a handler (" + v.thread.getName() + ")");
            }
            IrqThread t = new IrqThread(v, handler);
            v.thread = t;
            live.removeIf(x -> !x.isAlive()); // forget ended threads; one that is ending is still waited for
            live.add(t);
            if (v.pending) {
                // unmasking a vector with its PBA bit set delivers the interrupt once
                v.pending = false;
                v.signalled = true;
            }
            t.start();
        }
    }

    void freeIrq(int vector) {
        Thread t = detach(vector(vector));
        if (t != null) {
            awaitEnd(t);
        }
    }

    /** Frees the vector's handler without waiting; returns the thread to wait for. */
    private static IrqThread detach(Vector v) {
        synchronized (v) {
            IrqThread t = v.thread;
            v.thread = null;
            v.signalled = false; // an interrupt not yet picked up is lost, as with a message already sent to a freed vector
            v.notifyAll();
            return t;
        }
    }

    /** Waits for a handler thread to end, reporting a handler that does not return; a thread never waits for itself. */
    private void awaitEnd(Thread t) {
        if (t == Thread.currentThread()) {
            return; // freed from its own handler: the thread ends when the handler returns
        }
        boolean interrupted = false;
        try {
            while (t.isAlive()) {
                try {
                    if (!t.join(java.time.Duration.ofMillis(REPORT_EVERY_MS))) {
                        warn.accept("pci " + bdf + ": still waiting for the handler on " + t.getName() + " to return");
                    }
                } catch (InterruptedException e) {
                    interrupted = true; // free_irq does not give up: the handler must be done when we return
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    boolean irqRequested(int vector) {
        Vector v = vector(vector);
        synchronized (v) {
            return v.thread != null;
        }
    }

    long raised(int vector) {
        Vector v = vector(vector);
        synchronized (v) {
            return v.raised;
        }
    }

    long delivered(int vector) {
        Vector v = vector(vector);
        synchronized (v) {
            return v.delivered;
        }
    }

    boolean pending(int vector) {
        Vector v = vector(vector);
        synchronized (v) {
            return v.pending;
        }
    }

    void raise(int vector) {
        Vector v = vector(vector);
        synchronized (v) {
            if (!present.getAsBoolean()) {
                return;
            }
            v.raised++;
            if (v.thread != null) {
                v.signalled = true;
                v.notifyAll();
            } else {
                v.pending = true;
            }
        }
    }

}
