package org.peerdirect.hca.dpa;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.dpa.isa.Dpa;
import org.peerdirect.hca.dpa.isa.Hart.AtomicOp;
import org.peerdirect.hca.dpa.isa.Space;

/**
 * DPA memory as the seed's memory model describes it, checked (DPA_MODEL.md §3.4, §3.5): coherent
 * between DPA threads but weakly ordered, not coherent towards the NIC.
 *
 * <ul>
 * <li><b>Write buffers per EU.</b> A store lands in DPA memory (other harts see it: DPA↔DPA is
 *     coherent) and marks its 8-byte granule dirty in the EU's write buffer, keeping the bytes the
 *     NIC last saw. A NIC read ({@link #nicRead}) sees those old bytes until the EU's
 *     {@code memory_writeback}: check C1 reports the read with the store's and the doorbell's
 *     sites. Fences do not write back (the seed: "should not rely on this side effect"), which
 *     settles open question 4. Atomics are performed at memory and leave no dirty granule.</li>
 * <li><b>Fence epochs.</b> Each thread's stores carry (epoch, sequence); a W→W fence on memory, a
 *     write-back or an atomic starts a new epoch. When thread B has read a store of thread A and
 *     then reads an earlier store of A from the same epoch, nothing ordered the two: check C2
 *     reports it even when the interleaving happened to give the new value.</li>
 * <li><b>C6</b> ({@link #nicFetchRq}): the NIC takes a receive WQE on a new doorbell record value;
 *     WQE bytes still dirty, or stored in the DBR store's epoch, are reported with both sites.</li>
 * </ul>
 * In {@link CheckMode#OFF} none of this is kept: memory is sequentially consistent, for speed.
 * 8-byte aligned accesses are single-copy atomic; wider copies are sequences of them.
 *
 * <p>Lock: {@code lock} guards the buffers, the store records and every thread's epoch fields;
 * findings are reported after it is released (reporting may end a process, which takes the
 * RTOS lock).
 */
final class MemoryModel {

    private static final VarHandle LONG = DpaMemory.LONG.varHandle();
    private static final VarHandle INT = DpaMemory.INT.varHandle();
    private static final int MAX_FINDINGS = 1000;

    /** A granule dirty in some EUs' write buffers: what the NIC still sees, and who wrote it where. */
    private static final class Dirty {
        final long old;
        final BitSet eus = new BitSet();
        final DpaThread writer;
        final Sites.Site site;

        Dirty(long old, DpaThread writer, Sites.Site site) {
            this.old = old;
            this.writer = writer;
            this.site = site;
        }
    }

    /** The last store to a granule. */
    private record Store(DpaThread thread, long epoch, long seq, Sites.Site site) {
    }

    final CheckMode mode;
    private final DpaUnit unit;
    private final MemorySegment seg;
    private final ReentrantLock lock = new ReentrantLock();
    private final Map<Long, Dirty> dirty = new HashMap<>();
    private final List<Set<Long>> buffers = new ArrayList<>();
    private final Map<Long, Store> stores = new HashMap<>();
    private final List<Finding> findings = new ArrayList<>();
    /** Every write to DPA memory counted, for harts waiting out a poll of unchanged memory ({@link PollWaits}). */
    final PollWaits polls = new PollWaits();
    private final Set<String> reported = new HashSet<>();

    MemoryModel(DpaUnit unit, CheckMode mode, MemorySegment seg, int eus) {
        this.unit = unit;
        this.mode = mode;
        this.seg = seg;
        for (int i = 0; i < eus; i++) {
            buffers.add(new HashSet<>());
        }
    }

    static long get(MemorySegment s, long a, int bytes) {
        return switch (bytes) {
            case 1 -> s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, a) & 0xffL;
            case 2 -> s.get(DpaMemory.SHORT, a) & 0xffffL;
            case 4 -> s.get(DpaMemory.INT, a) & 0xffffffffL;
            default -> s.get(DpaMemory.LONG, a);
        };
    }

    static void put(MemorySegment s, long a, int bytes, long v) {
        switch (bytes) {
            case 1 -> s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, a, (byte) v);
            case 2 -> s.set(DpaMemory.SHORT, a, (short) v);
            case 4 -> s.set(DpaMemory.INT, a, (int) v);
            default -> s.set(DpaMemory.LONG, a, v);
        }
    }

    long load(Runner r, long a, int bytes) {
        if (mode == CheckMode.OFF) {
            return get(seg, a, bytes);
        }
        Finding f = null;
        long v;
        lock.lock();
        try {
            v = get(seg, a, bytes);
            DpaThread t = r.thread;
            Store s = stores.get(a & ~7L);
            if (s != null && s.thread != t) {
                long[] seen = t.observed.get(s.thread.id);
                if (seen != null && seen[0] == s.epoch && s.seq < seen[1]) {
                    f = new Finding("C2", t.process.id, t.id, Sites.here(), "read of 0x" + Long.toHexString(a)
                            + " stored by thread " + s.thread.id + " at " + Sites.format(s.site) + " after reading a later store of"
                            + " that thread in the same fence epoch: no __dpa_thread_memory_fence(W, W) orders them");
                }
                if (seen == null || s.seq > seen[1]) {
                    t.observed.put(s.thread.id, new long[] {s.epoch, s.seq});
                }
            }
        } finally {
            lock.unlock();
        }
        report(f, r.thread.process);
        return v;
    }

    void store(Runner r, long a, int bytes, long v) {
        if (mode == CheckMode.OFF) {
            put(seg, a, bytes, v);
            polls.written(a, bytes);
            return;
        }
        lock.lock();
        try {
            long g = a & ~7L;
            DpaThread t = r.thread;
            Dirty d = dirty.get(g);
            // the stack is walked once per granule dirtied since its write-back, not per store
            Sites.Site site = d != null && d.writer == t ? d.site : Sites.frame();
            if (d == null) {
                d = new Dirty(seg.get(DpaMemory.LONG, g), t, site);
                dirty.put(g, d);
            }
            d.eus.set(r.eu);
            buffers.get(r.eu).add(g);
            stores.put(g, new Store(t, t.epoch, ++t.seq, site));
            put(seg, a, bytes, v);
        } finally {
            lock.unlock();
        }
        polls.written(a, bytes);
    }

    long atomic(Runner r, AtomicOp op, long a, int bytes, long operand, long expect) {
        lock.lock();
        try {
            long old;
            if (bytes == 8) {
                old = switch (op) {
                    case SWAP -> (long) LONG.getAndSet(seg, a, operand);
                    case ADD -> (long) LONG.getAndAdd(seg, a, operand);
                    case CAS -> (long) LONG.compareAndExchange(seg, a, expect, operand);
                };
            } else {
                old = Integer.toUnsignedLong(switch (op) {
                    case SWAP -> (int) INT.getAndSet(seg, a, (int) operand);
                    case ADD -> (int) INT.getAndAdd(seg, a, (int) operand);
                    case CAS -> (int) INT.compareAndExchange(seg, a, (int) expect, (int) operand);
                });
            }
            if (mode != CheckMode.OFF) {
                DpaThread t = r.thread;
                long g = a & ~7L;
                t.epoch++; // SEQ_CST: ordered after every earlier access of the thread
                Dirty d = dirty.get(g);
                if (d != null && d.writer == t) {
                    dirty.remove(g);
                }
                stores.put(g, new Store(t, t.epoch, ++t.seq, null));
            }
            return old;
        } finally {
            lock.unlock();
            polls.written(a, bytes);
        }
    }

    void fence(Runner r, Space space, int pred, int succ) {
        if (mode == CheckMode.OFF || !space.coversMemory() || (pred & Dpa.W) == 0 || (succ & Dpa.W) == 0) {
            return;
        }
        lock.lock();
        try {
            r.thread.epoch++;
        } finally {
            lock.unlock();
        }
    }

    /** {@code __dpa_thread_memory_writeback}: the EU's dirty granules become what the NIC sees. */
    void writeback(Runner r) {
        if (mode == CheckMode.OFF) {
            return;
        }
        lock.lock();
        try {
            Set<Long> buf = buffers.get(r.eu);
            for (long g : buf) {
                Dirty d = dirty.get(g);
                if (d != null) {
                    d.eus.clear(r.eu);
                    if (d.eus.isEmpty()) {
                        dirty.remove(g);
                    }
                }
            }
            buf.clear();
            r.thread.epoch++;
        } finally {
            lock.unlock();
        }
    }

    /**
     * A NIC read of DPA memory (a WQE fetch, a doorbell record, send data): the NIC sees the bytes
     * written back, so dirty granules give their old bytes (as hardware would), and C1 reports it.
     */
    void nicRead(long a, MemorySegment dst, long off, long len, String what) {
        Dirty first = nicPoll(a, dst, off, len);
        if (first != null) {
            String site = Sites.format(first.site);
            report(new Finding("C1", first.writer.process.id, first.writer.id, site, "NIC read of " + what + " at 0x"
                    + Long.toHexString(a) + " (" + len + " bytes) reads bytes thread " + first.writer.id + " wrote at "
                    + site + " without __dpa_thread_memory_writeback before the doorbell (rung at " + Sites.here()
                    + "); the NIC saw the old bytes"), first.writer.process);
        }
    }

    /**
     * A NIC read of DPA memory as {@link #nicRead} without the report: the bytes written back
     * (old ones for dirty granules); the first dirty granule met, or null. What the NIC polls by
     * itself (a doorbell record) reads so.
     */
    Dirty nicPoll(long a, MemorySegment dst, long off, long len) {
        MemorySegment.copy(seg, a, dst, off, len);
        if (mode == CheckMode.OFF) {
            return null;
        }
        Dirty first = null;
        lock.lock();
        try {
            for (long g = a & ~7L; g < a + len; g += 8) {
                Dirty d = dirty.get(g);
                if (d == null) {
                    continue;
                }
                first = first == null ? d : first;
                for (int i = 0; i < 8; i++) {
                    long b = g + i;
                    if (b >= a && b < a + len) {
                        dst.set(java.lang.foreign.ValueLayout.JAVA_BYTE, off + b - a, (byte) (d.old >>> (8 * i)));
                    }
                }
            }
        } finally {
            lock.unlock();
        }
        return first;
    }

    /** A NIC write to DPA memory (a CQE, received data): coherent; it supersedes buffered stores. */
    void nicWrite(long a, MemorySegment src, long off, long len) {
        if (mode != CheckMode.OFF) {
            lock.lock();
            try {
                for (long g = a & ~7L; g < a + len; g += 8) {
                    dirty.remove(g);
                    stores.remove(g);
                }
            } finally {
                lock.unlock();
            }
        }
        MemorySegment.copy(src, off, seg, a, len);
        polls.written(a, len);
    }

    /**
     * A NIC atomic on an 8-byte aligned DPA address (an RDMA atomic through a DPA-memory mkey),
     * performed at memory: {@code op} reads and returns the old value and writes the new one. The
     * NIC reads what was written back, so a granule still dirty in an EU's write buffer is the C1
     * of {@link #nicRead}; its result supersedes the buffered store, as {@link #nicWrite}.
     */
    long nicAtomic(long a, java.util.function.LongUnaryOperator op) {
        Dirty d = null;
        long old;
        lock.lock();
        try {
            if (mode != CheckMode.OFF) {
                d = dirty.remove(a);
                stores.remove(a);
            }
            old = d != null ? d.old : (long) LONG.getVolatile(seg, a);
            LONG.setVolatile(seg, a, op.applyAsLong(old));
        } finally {
            lock.unlock();
        }
        polls.written(a, 8);
        if (d != null) {
            String site = Sites.format(d.site);
            report(new Finding("C1", d.writer.process.id, d.writer.id, site, "NIC atomic at 0x" + Long.toHexString(a)
                    + " read the bytes before thread " + d.writer.id + "'s store at " + site
                    + " (no __dpa_thread_memory_writeback): the NIC saw the old value"), d.writer.process);
        }
        return old;
    }

    /**
     * The NIC takes a receive WQE after reading a doorbell record (check C6): the DBR's bytes as the
     * NIC sees them, with findings when the WQE is still dirty or was stored in the DBR store's
     * fence epoch (no {@code memory_fence(W, W)} between them).
     */
    void nicFetchRq(long dbr, long wqe, MemorySegment dst, long len) {
        nicRead(wqe, dst, 0, len, "a receive WQE");
        if (mode == CheckMode.OFF) {
            return;
        }
        Finding f = null;
        lock.lock();
        try {
            Store d = stores.get(dbr & ~7L);
            for (long g = wqe & ~7L; g < wqe + len && d != null && f == null; g += 8) {
                Store w = stores.get(g);
                if (w != null && w.thread == d.thread && w.epoch == d.epoch && w.seq < d.seq) {
                    f = new Finding("C6", d.thread.process.id, d.thread.id, Sites.format(d.site), "receive doorbell record 0x"
                            + Long.toHexString(dbr) + " stored at " + Sites.format(d.site) + " in the same fence epoch as its WQE"
                            + " stored at " + Sites.format(w.site) + ": __dpa_thread_memory_fence(W, W) missing between them");
                }
            }
        } finally {
            lock.unlock();
        }
        if (f != null) {
            report(f, f.process() == 0 ? null : unit.process(f.process()));
        }
    }

    /** A new activation of {@code t}: what it read in earlier ones no longer orders anything (a syscall is a full barrier). */
    void activationStart(DpaThread t) {
        if (mode == CheckMode.OFF) {
            return;
        }
        lock.lock();
        try {
            t.observed.clear();
            t.epoch++;
        } finally {
            lock.unlock();
        }
    }

    /** Forgets what the model keeps of a freed region. */
    void forget(DpaMemory.Region r) {
        lock.lock();
        try {
            dirty.keySet().removeIf(g -> g >= r.base() && g < r.base() + r.size());
            stores.keySet().removeIf(g -> g >= r.base() && g < r.base() + r.size());
            for (Set<Long> b : buffers) {
                b.removeIf(g -> g >= r.base() && g < r.base() + r.size());
            }
        } finally {
            lock.unlock();
        }
    }

    /** Records a finding (once per check and site); in strict mode it ends the process. */
    void report(Finding f, DpaProcess p) {
        if (f == null || mode == CheckMode.OFF) {
            return;
        }
        lock.lock();
        try {
            if (!reported.add(f.check() + "@" + f.process() + "@" + f.site()) || findings.size() >= MAX_FINDINGS) {
                return;
            }
            findings.add(f);
        } finally {
            lock.unlock();
        }
        System.getLogger("peerdirect.dpa").log(System.Logger.Level.WARNING, "DPA memory model: " + f);
        if (mode == CheckMode.STRICT && p != null) {
            unit.fail(p, ProcessStatus.MEMORY_MODEL, f.toString(), f.thread(), f.site());
        }
    }

    List<Finding> findings() {
        lock.lock();
        try {
            return List.copyOf(findings);
        } finally {
            lock.unlock();
        }
    }
}
