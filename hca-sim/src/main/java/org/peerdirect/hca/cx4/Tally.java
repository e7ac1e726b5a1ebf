package org.peerdirect.hca.cx4;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A statistics counter of one queue, the way the hardware keeps one per queue: one writer at a
 * time (the lock its owner names serialises the increments), so an increment is a plain add
 * published opaquely, with no atomic instruction and no cache line shared with another queue's
 * data path. Readers on other threads see a recent value; a total over queues is a sum of these.
 */
final class Tally {
    private static final VarHandle VALUE;

    static {
        try {
            VALUE = MethodHandles.lookup().findVarHandle(Tally.class, "value", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Written only by the owner's lock holder; read opaquely by anyone. */
    private long value;

    /** One more; the caller holds the owner's lock (the one writer). */
    void increment() {
        VALUE.setOpaque(this, value + 1);
    }

    long get() {
        return (long) VALUE.getOpaque(this);
    }
}
