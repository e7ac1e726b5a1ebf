package org.peerdirect.hca.dpa;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.peerdirect.hca.dpa.WindowEntity.Line;

/**
 * Window accesses: a thread's loads and stores in a window aperture go through the entity's line
 * cache to host memory via the {@link WindowPort} (an mkey, the MPT, the IOMMU). Not coherent:
 * a line read hits until {@code window_read_inv}, a store stays in the line until
 * {@code window_writeback}. Checks: C3 (dirty lines left at the end of an activation or at
 * destroy) and C4 (a line polled {@code stalePolls} times while host memory changed under it).
 *
 * <p>The aperture ({@code ptr_acquire}'s address, "peerdirect PRM extension v1"):
 * {@code WINDOW_BASE + entity << 48 + haddr}, one 256 TiB aperture per entity covering the whole
 * host VA space; only the mkey's range is accessible. Everything here runs on the thread's own
 * activation.
 */
final class Windows {

    static final long WINDOW_BASE = 1L << 52;
    static final long HADDR_MASK = (1L << 48) - 1;

    private final DpaUnit unit;

    Windows(DpaUnit unit) {
        this.unit = unit;
    }

    static boolean isWindow(long daddr) {
        return daddr >= WINDOW_BASE && daddr < WINDOW_BASE + (2L << 48);
    }

    int config(Runner r, int entity, int windowId, int mkey) {
        DpaThread t = r.thread;
        Window w = entity == 0 || entity == 1 ? unit.window(windowId) : null;
        if (w == null || w.process() != t.process) {
            return r.failSoft(); // another process's window, or none
        }
        WindowPort.Mkey key = unit.windowPort.lookup(mkey);
        if (key == null || key.pd() != w.pd()) {
            return r.failSoft(); // no such mkey, or one of another PD
        }
        WindowEntity e = t.entities[entity];
        leftDirty(t, e, "window_config of entity " + entity, true);
        e.lines.clear();
        e.window = w;
        e.mkey = mkey;
        e.key = key;
        return 0;
    }

    long ptrAcquire(Runner r, int entity, long haddr) {
        if (entity != 0 && entity != 1) {
            r.failSoft();
            return 0;
        }
        WindowEntity e = r.thread.entities[entity];
        if (!e.configured() || (haddr & ~HADDR_MASK) != 0 || !e.key.covers(haddr, 1)) {
            r.failSoft();
            return 0;
        }
        return WINDOW_BASE + ((long) entity << 48) + haddr;
    }

    private WindowEntity entity(Runner r, long daddr, long va, int bytes, boolean write) {
        WindowEntity e = r.thread.entities[(int) ((daddr - WINDOW_BASE) >>> 48)];
        if (!e.configured()) {
            throw r.abort(ProcessStatus.ACCESS_FAULT, "window access at 0x" + Long.toHexString(daddr)
                    + " through an entity not configured");
        }
        if (!e.key.covers(va, bytes) || (write ? !e.key.write() : !e.key.read())) {
            throw r.abort(ProcessStatus.WINDOW_FAULT, (write ? "write" : "read") + " of host 0x" + Long.toHexString(va)
                    + " outside mkey 0x" + Integer.toHexString(e.mkey) + "'s range or rights");
        }
        return e;
    }

    long load(Runner r, long daddr, int bytes) {
        long va = (daddr - WINDOW_BASE) & HADDR_MASK;
        WindowEntity e = entity(r, daddr, va, bytes, false);
        long lineVa = va & -WindowEntity.LINE;
        int off = (int) (va - lineVa);
        long need = WindowEntity.mask(off, bytes);
        Line l = e.lines.get(lineVa);
        if (l != null && (l.valid & need) == need) {
            if (++l.hits >= unit.config.stalePolls() && unit.mm.mode != CheckMode.OFF) {
                l.hits = 0;
                stale(r, e, lineVa, l);
            }
        } else {
            l = fill(r, e, lineVa, l);
        }
        return MemoryModel.get(l.bytes, off, bytes);
    }

    void store(Runner r, long daddr, int bytes, long v) {
        long va = (daddr - WINDOW_BASE) & HADDR_MASK;
        WindowEntity e = entity(r, daddr, va, bytes, true);
        long lineVa = va & -WindowEntity.LINE;
        int off = (int) (va - lineVa);
        Line l = e.lines.computeIfAbsent(lineVa, k -> new Line());
        MemoryModel.put(l.bytes, off, bytes, v);
        long m = WindowEntity.mask(off, bytes);
        l.valid |= m;
        l.dirty |= m;
        if (l.site == null && unit.mm.mode != CheckMode.OFF) {
            l.site = Sites.here();
        }
    }

    /** Fills the line's clean bytes from host memory (clipped to the mkey's range). */
    private Line fill(Runner r, WindowEntity e, long lineVa, Line l) {
        Line line = l == null ? new Line() : l;
        long lo = Math.max(lineVa, e.key.start());
        long hi = Math.min(lineVa + WindowEntity.LINE, e.key.start() + e.key.length());
        MemorySegment tmp = Arena.ofAuto().allocate(WindowEntity.LINE);
        dma(r, e, () -> unit.windowPort.read(e.mkey, lo, tmp, lo - lineVa, hi - lo), lo);
        for (int i = (int) (lo - lineVa); i < hi - lineVa; i++) {
            if ((line.dirty & (1L << i)) == 0) {
                line.bytes.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, tmp.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i));
            }
        }
        line.valid |= WindowEntity.mask((int) (lo - lineVa), (int) (hi - lo));
        line.hits = 0;
        e.lines.put(lineVa, line);
        return line;
    }

    /** C4: the line was polled again and again; does host memory still hold what it cached? */
    private void stale(Runner r, WindowEntity e, long lineVa, Line l) {
        long lo = Math.max(lineVa, e.key.start());
        long hi = Math.min(lineVa + WindowEntity.LINE, e.key.start() + e.key.length());
        MemorySegment now = Arena.ofAuto().allocate(WindowEntity.LINE);
        dma(r, e, () -> unit.windowPort.read(e.mkey, lo, now, lo - lineVa, hi - lo), lo);
        for (int i = (int) (lo - lineVa); i < hi - lineVa; i++) {
            long bit = 1L << i;
            if ((l.valid & bit) != 0 && (l.dirty & bit) == 0 && now.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i)
                    != l.bytes.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i)) {
                DpaThread t = r.thread;
                unit.mm.report(new Finding("C4", t.process.id, t.id, Sites.here(), "poll of host 0x"
                        + Long.toHexString(lineVa + i) + " without __dpa_thread_window_read_inv: host memory changed"
                        + " since the line was filled; the thread keeps reading the old value"), t.process);
                r.checkAlive();
                return;
            }
        }
    }

    /** {@code __dpa_thread_window_writeback}: the thread's dirty window bytes go to host memory. */
    void writeback(Runner r) {
        for (WindowEntity e : r.thread.entities) {
            for (Map.Entry<Long, Line> le : e.lines.entrySet()) {
                Line l = le.getValue();
                for (int i = 0; i < WindowEntity.LINE && l.dirty != 0;) {
                    if ((l.dirty & (1L << i)) == 0) {
                        i++;
                        continue;
                    }
                    int j = i;
                    while (j < WindowEntity.LINE && (l.dirty & (1L << j)) != 0) {
                        j++;
                    }
                    long va = le.getKey() + i;
                    int from = i;
                    int n = j - i;
                    dma(r, e, () -> unit.windowPort.write(e.mkey, va, l.bytes, from, n), va);
                    l.dirty &= ~WindowEntity.mask(i, n);
                    i = j;
                }
                l.site = null;
            }
        }
    }

    /** {@code __dpa_thread_window_read_inv}: clean cached bytes are dropped (dirty ones stay). */
    void readInv(Runner r) {
        for (WindowEntity e : r.thread.entities) {
            for (Iterator<Line> it = e.lines.values().iterator(); it.hasNext();) {
                Line l = it.next();
                l.valid &= l.dirty;
                l.hits = 0;
                if (l.dirty == 0) {
                    it.remove();
                }
            }
        }
    }

    /**
     * C3: dirty window lines when the thread lets go of them; returns whether any were left. While
     * the thread runs (strict mode) the finding ends its process; at a destroy it is only recorded.
     */
    boolean leftDirty(DpaThread t, WindowEntity e, String when, boolean running) {
        List<String> lines = new ArrayList<>();
        for (Map.Entry<Long, Line> le : e.lines.entrySet()) {
            if (le.getValue().dirty != 0) {
                lines.add("host 0x" + Long.toHexString(le.getKey()) + " written at " + le.getValue().site);
            }
        }
        if (lines.isEmpty() || unit.mm.mode == CheckMode.OFF) {
            return !lines.isEmpty();
        }
        String site = e.lines.values().stream().filter(l -> l.dirty != 0).map(l -> l.site).findFirst().orElse("?");
        unit.mm.report(new Finding("C3", t.process.id, t.id, site, "window data never written back at " + when + ": "
                + lines + " (no __dpa_thread_window_writeback; the host never sees it)"), running ? t.process : null);
        return true;
    }

    private void dma(Runner r, WindowEntity e, Runnable transfer, long va) {
        try {
            transfer.run();
        } catch (ActivationExit x) {
            throw x;
        } catch (RuntimeException x) {
            throw r.abort(ProcessStatus.WINDOW_FAULT, "window DMA at host 0x" + Long.toHexString(va) + " through mkey 0x"
                    + Integer.toHexString(e.mkey) + " faulted: " + x.getMessage() + " at " + Sites.here());
        }
    }
}
