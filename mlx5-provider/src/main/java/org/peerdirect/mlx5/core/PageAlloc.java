package org.peerdirect.mlx5.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.kernel.mm.KernelException;

/**
 * Firmware pages from the driver's side ({@code pagealloc.c}): {@code QUERY_PAGES} and
 * {@code MANAGE_PAGES GIVE} for boot and init pages at bring-up, the page-request work (a
 * dedicated thread, Linux's {@code mlx5_page_allocator} workqueue) that gives or takes what the
 * firmware asks for, and {@code mlx5_reclaim_startup_pages} at teardown. Every page given is a
 * {@link DmaCoherentPages} page, mapped for the device until the firmware hands it back.
 *
 * <p>Lock rules: {@code given} is concurrent; the counters are atomics; the work thread and the
 * bring-up thread may both run page commands, which the command interface serialises on its
 * reserved slot.
 */
final class PageAlloc {

    /** Entries per MANAGE_PAGES command (Linux sizes it to the mailbox; 512 keeps a command within 9 blocks). */
    static final int MAX_PER_COMMAND = 512;
    /** {@code MAX_RECLAIM_NPAGES}: a negative request is clamped to this. */
    static final int MAX_RECLAIM_NPAGES = -50000;

    enum Kind {
        BOOT, INIT, REGULAR
    }

    private final String name;
    private final CmdIf cmd;
    private final DmaCoherentPages dma;
    private final Map<Long, DmaCoherentPages.Page> given = new ConcurrentHashMap<>();
    private final AtomicLong[] givenBy = { new AtomicLong(), new AtomicLong(), new AtomicLong() };
    private final AtomicLong taken = new AtomicLong();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong cantGive = new AtomicLong();
    private final AtomicLong reclaimedLocally = new AtomicLong();
    private final ExecutorService work;
    /** Set by {@link #stop}: requests not started yet are dropped. */
    private volatile boolean stopping;

    PageAlloc(String name, CmdIf cmd, DmaCoherentPages dma) {
        this.name = name;
        this.cmd = cmd;
        this.dma = dma;
        this.work = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().daemon().name(name + "-pages").unstarted(r));
    }

    /** {@code mlx5_satisfy_startup_pages}: asks how many boot or init pages the firmware wants and gives them. */
    void satisfyStartupPages(boolean boot) {
        MemorySegment in = CmdIf.input(Mlx5Cmd.QUERY_PAGES, boot ? Pages.QUERY_BOOT : Pages.QUERY_INIT, 16);
        int n = cmd.exec(in, 16).get(BE32, Pages.QUERY_OUT_NUM_PAGES);
        if (n > 0) {
            give(n, boot ? Kind.BOOT : Kind.INIT);
        }
    }

    /** Gives {@code n} pages, in commands of at most {@link #MAX_PER_COMMAND}. */
    void give(int n, Kind kind) {
        while (n > 0) {
            int k = Math.min(n, MAX_PER_COMMAND);
            DmaCoherentPages.Page[] ps = new DmaCoherentPages.Page[k];
            try {
                for (int i = 0; i < k; i++) {
                    ps[i] = dma.alloc();
                }
            } catch (KernelException noMemory) {
                for (DmaCoherentPages.Page p : ps) {
                    if (p != null) {
                        dma.free(p);
                    }
                }
                throw noMemory;
            }
            MemorySegment in = CmdIf.input(Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_GIVE, (int) Pages.MANAGE_IN_PAS + 8 * k);
            in.set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, k);
            for (int i = 0; i < k; i++) {
                in.set(BE64, Pages.MANAGE_IN_PAS + 8L * i, ps[i].iova());
            }
            try {
                cmd.execPages(in, 16);
            } catch (Mlx5CmdException e) {
                if (e.kind() == Mlx5CmdException.Kind.STATUS || e.kind() == Mlx5CmdException.Kind.DELIVERY) {
                    for (DmaCoherentPages.Page p : ps) {
                        dma.free(p); // refused: the firmware holds none of them
                    }
                } else {
                    for (DmaCoherentPages.Page p : ps) {
                        given.put(p.iova(), p); // unknown: kept as given, taken back locally at teardown
                    }
                }
                throw e;
            }
            for (DmaCoherentPages.Page p : ps) {
                given.put(p.iova(), p);
            }
            givenBy[kind.ordinal()].addAndGet(k);
            n -= k;
        }
    }

    /**
     * Asks the firmware to hand back up to {@code n} pages ({@code reclaim_pages}); frees what it
     * returns. A page the firmware names that the driver never gave is a firmware bug: refused
     * loudly, nothing freed for it.
     *
     * @return pages handed back
     */
    int take(int n) {
        int k = Math.min(n, MAX_PER_COMMAND);
        MemorySegment in = CmdIf.input(Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_TAKE, 16);
        in.set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, k);
        MemorySegment out = cmd.execPages(in, (int) Pages.MANAGE_OUT_PAS + 8 * k);
        int got = out.get(BE32, Pages.MANAGE_OUT_NUM_ENTRIES);
        if (got < 0 || got > k) {
            throw new IllegalStateException(name + ": MANAGE_PAGES TAKE returned " + got + " pages, more than the " + k + " asked for");
        }
        for (int i = 0; i < got; i++) {
            long iova = out.get(BE64, Pages.MANAGE_OUT_PAS + 8L * i);
            DmaCoherentPages.Page p = given.remove(iova);
            if (p == null) {
                throw new IllegalStateException(String.format("%s: firmware returned page 0x%x that the driver never gave", name, iova));
            }
            dma.free(p);
        }
        taken.addAndGet(got);
        return got;
    }

    /** {@code mlx5_core_req_pages_handler}: queues the firmware's request (EQ context: no command here). */
    void request(int numPages) {
        requests.incrementAndGet();
        work.execute(() -> pagesWork(numPages));
    }

    private void pagesWork(int numPages) {
        if (stopping) {
            return; // queued before the stop: dropped
        }
        try {
            if (numPages > 0) {
                try {
                    give(numPages, Kind.REGULAR);
                } catch (KernelException noMemory) {
                    cantGive.incrementAndGet();
                    MemorySegment in = CmdIf.input(Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_CANT_GIVE, 16);
                    cmd.execPages(in, 16);
                }
            } else if (numPages < 0) {
                take(-Math.max(numPages, MAX_RECLAIM_NPAGES));
            }
        } catch (Mlx5CmdException e) {
            // a firmware error on an event-triggered GIVE/TAKE is ignored, as Linux does (it is in the command log)
        }
    }

    /**
     * {@code mlx5_reclaim_startup_pages}: takes pages back until the firmware holds none, giving
     * up after {@code timeoutNanos} without progress. A dead or vanished firmware gets no command:
     * its pages are reclaimed locally ("no hard feelings, we want our pages back").
     */
    void reclaimAll(long timeoutNanos, boolean firmwareAlive) {
        long lastProgress = System.nanoTime();
        while (firmwareAlive && !given.isEmpty()) {
            int got;
            try {
                got = take(given.size());
            } catch (Mlx5CmdException e) {
                break;
            }
            if (got > 0) {
                lastProgress = System.nanoTime();
            } else if (System.nanoTime() - lastProgress > timeoutNanos) {
                break;
            }
        }
        for (DmaCoherentPages.Page p : given.values().toArray(DmaCoherentPages.Page[]::new)) {
            given.remove(p.iova());
            dma.free(p);
            reclaimedLocally.incrementAndGet();
        }
    }

    /**
     * {@code mlx5_pagealloc_stop}: requests still queued are dropped (the firmware is being torn
     * down, and the reclaim that follows takes every page back); the one running finishes, its
     * command waited for within {@code boundNanos} (the command timeout and a margin), as Linux
     * flushes its page workqueue. Never interrupted: an interrupted waiter gives its command up
     * while the firmware still executes it, and with it the reserved slot, so the reclaim found no
     * slot for its MANAGE_PAGES and took the pages back locally while the firmware held them.
     */
    void stop(long boundNanos) {
        stopping = true;
        work.shutdown();
        try {
            if (!work.awaitTermination(boundNanos, TimeUnit.NANOSECONDS)) {
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, name + ": page work did not stop within "
                        + TimeUnit.NANOSECONDS.toMillis(boundNanos) + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Pages the firmware holds now. */
    int held() {
        return given.size();
    }

    long given(Kind k) {
        return givenBy[k.ordinal()].get();
    }

    long taken() {
        return taken.get();
    }

    long requests() {
        return requests.get();
    }

    long cantGive() {
        return cantGive.get();
    }

    long reclaimedLocally() {
        return reclaimedLocally.get();
    }
}
