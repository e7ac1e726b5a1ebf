package org.peerdirect.ib.core.peer;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.peermem.PeerMemoryStatistics;

/**
 * {@code struct ib_peer_memory_client}: one registered client, its tickets, its use count and
 * its statistics. It is the registration handle the client holds.
 *
 * <p>Lock rules: {@link #xaLock} ({@code xa_lock}) guards {@link #umemXa},
 * {@link #xaCyclicNext} and {@link #numFreeCallbacks}; nothing else is called while holding it.
 */
final class PeerClient implements PeerMemoryRegistration {

    enum Life {
        /** brokered */
        REGISTERED,
        /** removed from brokering, waiting for its umems to go */
        DRAINING,
        /** no umem uses it; no callback will ever be made */
        UNREGISTERED
    }

    final PeerMemoryController core;
    final PeerMemoryClient ops;
    private final String name;
    final String version;
    final boolean invalidationRequired;
    final boolean unmapsOnInvalidate;

    /** {@code usecnt}: 1 for the registration itself, +1 per acquired context until its release. */
    private final AtomicLong usecnt = new AtomicLong(1);
    private final CountDownLatch usecntZero = new CountDownLatch(1);
    private final AtomicBoolean initialRefDropped = new AtomicBoolean();
    volatile Life life = Life.REGISTERED;
    private final AtomicBoolean finished = new AtomicBoolean();
    /** Every umem holding a use count, for the unregister log and for shutdown. */
    final Set<PeerUmem> users = ConcurrentHashMap.newKeySet();

    private final Object xaLock = new Object();
    private final Map<Long, PeerUmem> umemXa = new HashMap<>();
    private long xaCyclicNext;
    private long numFreeCallbacks;

    final AtomicLong numAllocMrs = new AtomicLong();
    final AtomicLong numDeallocMrs = new AtomicLong();
    final AtomicLong numRegPages = new AtomicLong();
    final AtomicLong numDeregPages = new AtomicLong();
    final AtomicLong numRegBytes = new AtomicLong();
    final AtomicLong numDeregBytes = new AtomicLong();

    PeerClient(PeerMemoryController core, PeerMemoryClient ops, String name, String version, boolean invalidation) {
        this.core = core;
        this.ops = ops;
        this.name = name;
        this.version = version;
        this.invalidationRequired = invalidation;
        this.unmapsOnInvalidate = (ops.flags() & PeerMemoryClient.INVALIDATE_UNMAPS) != 0;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public boolean invalidationRequired() {
        return invalidationRequired;
    }

    // ------------------------------------------------------------------ use count

    /** A successful acquire took a use count; caller holds the controller's peer memory mutex. */
    void get() {
        usecnt.incrementAndGet();
    }

    /** {@code ib_put_peer_client}: {@code release(ctx)} then drop the use count. */
    void put(Object clientContext) {
        try {
            ops.release(clientContext);
        } catch (RuntimeException e) {
            core.warn("peer memory client " + name + ": release threw " + e);
        } finally {
            if (usecnt.decrementAndGet() == 0) {
                usecntZero.countDown();
            }
        }
    }

    long useCount() {
        return usecnt.get();
    }

    // ------------------------------------------------------------------ tickets

    /** {@code xa_alloc_cyclic(umem_xa, .., XA_LIMIT(0, U32_MAX - 1), &xa_cyclic_next)}. */
    long xaAllocCyclic(PeerUmem u) {
        synchronized (xaLock) {
            if (umemXa.size() >= PeerMemoryRegistry.NO_INVALIDATION_ID) {
                throw new KernelException(Errno.ENOMEM, "peer memory client " + name + ": no free ticket");
            }
            long id = xaCyclicNext;
            while (umemXa.containsKey(id)) {
                id = id + 1 == PeerMemoryRegistry.NO_INVALIDATION_ID ? 0 : id + 1;
            }
            umemXa.put(id, u);
            xaCyclicNext = id + 1 == PeerMemoryRegistry.NO_INVALIDATION_ID ? 0 : id + 1;
            return id;
        }
    }

    void xaErase(long id) {
        synchronized (xaLock) {
            umemXa.remove(id);
        }
    }

    /** For tests of the wrap-around: where the next ticket search starts. */
    void setCyclicNext(long next) {
        synchronized (xaLock) {
            xaCyclicNext = next;
        }
    }

    // ------------------------------------------------------------------ callbacks

    /** {@code ib_invalidate_peer_memory}. */
    @Override
    public void invalidate(long coreContext) {
        if (!invalidationRequired) {
            throw new IllegalStateException("peer memory client " + name + " was registered without an invalidation callback");
        }
        if (life == Life.UNREGISTERED) {
            throw new IllegalStateException("peer memory client " + name + " is unregistered: its registration handle is no longer valid");
        }
        PeerUmem u;
        synchronized (xaLock) {
            numFreeCallbacks++;
            u = umemXa.get(coreContext);
        }
        if (u != null) {
            u.invalidate();
        }
    }

    /** Statistics of a new mapping (num_alloc_mrs, num_reg_pages/bytes). */
    void countMap(int nmap, long length) {
        numRegPages.addAndGet(nmap);
        numRegBytes.addAndGet(length);
        numAllocMrs.incrementAndGet();
    }

    /** The core's unmap of a mapped umem: {@code dmaUnmap} then {@code putPages}. */
    void unmap(PeerUmem u) {
        try {
            ops.dmaUnmap(u.sg, u.clientContext, u.device());
        } catch (RuntimeException e) {
            core.warn("peer memory client " + name + ": dma_unmap of " + u + " threw " + e + " (it must not fail)");
        }
        try {
            ops.putPages(u.sg, u.clientContext);
        } catch (RuntimeException e) {
            core.warn("peer memory client " + name + ": put_pages of " + u + " threw " + e);
        }
    }

    /** {@code ib_peer_umem_release} after the unmap: ticket, client context, memlock. */
    void releaseUmem(PeerUmem u) {
        if (u.xaId != PeerMemoryRegistry.NO_INVALIDATION_ID) {
            xaErase(u.xaId);
        }
        users.remove(u);
        try {
            put(u.clientContext);
        } finally {
            u.mm().unchargePinnedVm(u.npages());
        }
    }

    // ------------------------------------------------------------------ unregister

    @Override
    public void unregister() {
        boolean interrupted = false;
        for (;;) {
            try {
                if (unregister(null)) {
                    break;
                }
            } catch (InterruptedException e) {
                interrupted = true; // wait_for_completion is uninterruptible
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public boolean unregister(Duration timeout) throws InterruptedException {
        core.removeFromBrokering(this);
        if (initialRefDropped.compareAndSet(false, true) && usecnt.decrementAndGet() == 0) {
            usecntZero.countDown();
        }
        long deadline = timeout == null ? Long.MAX_VALUE : System.nanoTime() + timeout.toNanos();
        long interval = core.unregisterLogInterval().toNanos();
        for (;;) {
            long wait = Math.min(interval, deadline - System.nanoTime());
            if (usecntZero.await(Math.max(0, wait), TimeUnit.NANOSECONDS)) {
                break;
            }
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            List<String> holders = users.stream().map(PeerUmem::toString).sorted().toList();
            core.warn("peer memory client " + name + ": unregister waits for " + holders.size()
                    + " registration(s) still using it; deregister them (ibv_dereg_mr) to let it go: " + holders);
        }
        if (finished.compareAndSet(false, true)) {
            life = Life.UNREGISTERED;
            core.finishUnregister(this);
        }
        return true;
    }

    // ------------------------------------------------------------------ statistics

    @Override
    public PeerMemoryStatistics statistics() {
        long free;
        synchronized (xaLock) {
            free = numFreeCallbacks;
        }
        return new PeerMemoryStatistics(version, numAllocMrs.get(), numDeallocMrs.get(), numRegPages.get(),
                numDeregPages.get(), numRegBytes.get(), numDeregBytes.get(), free);
    }

    @Override
    public String toString() {
        return "peer memory client " + name + " " + version + " (" + life + ", " + users.size() + " umems"
                + (invalidationRequired ? ", invalidation" : "") + (unmapsOnInvalidate ? ", INVALIDATE_UNMAPS" : "") + ")";
    }
}
