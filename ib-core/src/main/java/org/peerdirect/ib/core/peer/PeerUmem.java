package org.peerdirect.ib.core.peer;

import java.util.concurrent.Semaphore;

import org.peerdirect.ib.core.peer.MappedState.Event;
import org.peerdirect.ib.core.peer.MappedState.Step;
import org.peerdirect.ib.core.umem.UmemInvalidateFunction;
import org.peerdirect.ib.core.umem.impl.Umem;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.ib.core.jfr.IbCoreEvents;

/**
 * {@code struct ib_umem_peer}: a umem whose pages a peer client supplies.
 *
 * <p>Lock rules. {@link #mappingLock} is the kernel's {@code mapping_lock}, a binary semaphore
 * because the registering thread takes it and the driver may lift it from another thread. It
 * guards {@link #state}, {@link #func}, {@link #sg} and {@link #fenceHeld}. It is taken:
 * <ul>
 * <li>by {@link PeerMemoryController#peerUmemGetAndLock} before {@code getPages}; for an
 * invalidating client it is still held when the umem reaches the driver (the fence) and is lifted
 * by {@link #activateInvalidationNotifier} or by the stop/release of a failed registration;</li>
 * <li>by {@link #invalidate} (a client's invalidation), which therefore waits for the fence;</li>
 * <li>by {@link #stopInvalidationNotifier} and {@link #release} (deregistration).</li>
 * </ul>
 * The driver's invalidate function and the client's {@code dmaUnmap}/{@code putPages} are called
 * with it held (except for {@code INVALIDATE_UNMAPS} clients at deregistration, as the kernel
 * does). Never take {@link PeerClient}'s xa lock while holding it.
 */
final class PeerUmem extends Umem {

    final PeerClient client;
    final Object clientContext;
    final Semaphore mappingLock = new Semaphore(1);
    /** The ticket ({@code xa_id}); NO_INVALIDATION_ID for clients without invalidation. */
    long xaId = PeerMemoryRegistry.NO_INVALIDATION_ID;
    // guarded by mappingLock
    private MappedState state = MappedState.UNMAPPED;
    private UmemInvalidateFunction func;
    private boolean fenceHeld;
    private boolean activated;
    private boolean stopped;
    private boolean invalidated;
    /** The client's table from dmaMap: what dmaUnmap and putPages receive. */
    SgTable sg = SgTable.EMPTY;
    // guarded by this
    private boolean released;
    /** Revoked and released by the core at shutdown: the driver's stop and release do nothing. */
    private boolean revokedByCore;

    PeerUmem(PeerClient client, Object clientContext, AddressSpace mm, DmaDevice device, long address, long length, boolean writable) {
        super(mm, device, address, length, writable);
        this.client = client;
        this.clientContext = clientContext;
    }

    /**
     * The blocks from the client's table: checks {@code dma_map}'s contract (4 KiB-aligned
     * entries covering the range aligned to the client's page size) and trims the first and last
     * entries to the 4 KiB-aligned user range ({@code fix_peer_sgls}, OFED 5.5+).
     */
    void setBlocksFromPeer(SgTable t, long peerPageSize) {
        String who = "peer memory client " + client.name() + ": ";
        int bad = t.firstMisaligned();
        if (bad >= 0) {
            throw new KernelException(Errno.EINVAL, String.format("%sdma_map returned entry %d (0x%x+%d) not aligned to %d bytes",
                    who, bad, t.dmaAddress(bad), t.length(bad), SgTable.PAGE_SIZE));
        }
        if (peerPageSize < SgTable.PAGE_SIZE || Long.bitCount(peerPageSize) != 1) {
            throw new KernelException(Errno.EINVAL, who + "get_page_size returned " + peerPageSize + ", not a power of two of at least 4096");
        }
        long start = alignDown(address, peerPageSize);
        long end = alignUp(address + length, peerPageSize);
        if (t.totalLength() != end - start) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "%sdma_map covers %d bytes in %d entries; the range 0x%x+%d aligned to its %d-byte pages needs %d",
                    who, t.totalLength(), t.nents(), address, length, peerPageSize, end - start));
        }
        long trimFirst = alignDown(address, SgTable.PAGE_SIZE) - start;
        long trimLast = end - alignUp(address + length, SgTable.PAGE_SIZE);
        try {
            setBlocks(t.trimmed(trimFirst, trimLast));
        } catch (IllegalArgumentException e) {
            throw new KernelException(Errno.EINVAL, who + "its entries are smaller than its page size " + peerPageSize + ": " + e.getMessage());
        }
    }

    /** Takes the mapping lock as the registration fence; the caller releases it by the rules above. */
    void lockFence() {
        mappingLock.acquireUninterruptibly();
        fenceHeld = true;
    }

    /** Lifts the fence taken by {@link #lockFence}. Caller holds the mapping lock as the fence. */
    void unlockFence() {
        assert fenceHeld : "fence not held";
        fenceHeld = false;
        mappingLock.release();
    }

    /** Applies {@code e}; caller holds the mapping lock. Returns the step for the caller's unmap. */
    private Step apply(Event e, boolean unmapNow) {
        Step s = state.on(e, client.unmapsOnInvalidate);
        if (s.allocMr()) {
            client.countMap(sg.nents(), length);
        }
        if (s.coreUnmaps() && unmapNow) {
            client.unmap(this);
        }
        if (s.deallocMr()) {
            client.numDeallocMrs.incrementAndGet();
        }
        if (s.deregPages()) {
            client.numDeregPages.addAndGet(sg.nents());
            client.numDeregBytes.addAndGet(length);
        }
        if (s.next() == MappedState.INVALIDATED || e == Event.INVALIDATE && s.callDriver()) {
            invalidated = true;
        }
        state = s.next();
        return s;
    }

    /** The registration is built: MAPPED. Caller holds the mapping lock (the fence). */
    void mapped() {
        apply(Event.MAP, false);
    }

    MappedState stateForTests() {
        return state;
    }

    /** {@code ib_invalidate_peer_memory} for this umem, after the xa lookup. */
    void invalidate() {
        IbCoreEvents.PeerInvalidate jfr = IbCoreEvents.PeerInvalidate.start();
        boolean called = false;
        mappingLock.acquireUninterruptibly();
        try {
            Step s = state.on(Event.INVALIDATE, client.unmapsOnInvalidate);
            if (s.callDriver() && func != null) {
                called = true;
                try {
                    func.invalidate(this);
                } catch (RuntimeException ex) {
                    client.core.warn("driver invalidate function of " + describe() + " threw " + ex + "; unmapping anyway");
                }
            }
            apply(Event.INVALIDATE, true);
        } finally {
            mappingLock.release();
            IbCoreEvents.PeerInvalidate.done(jfr, client.name(), xaId, address, length, called);
        }
    }

    @Override
    public void activateInvalidationNotifier(UmemInvalidateFunction f) {
        if (f == null) {
            throw new IllegalArgumentException("invalidate function is null");
        }
        if (xaId == PeerMemoryRegistry.NO_INVALIDATION_ID) {
            return; // a client without invalidation never calls it
        }
        // the caller does not hold the lock; fenceHeld is only written under it, and a
        // registration hands the umem to its driver after setting it (happens-before via the caller)
        synchronized (this) {
            if (activated || stopped || released) {
                throw new IllegalStateException("invalidation notifier of " + this + " already "
                        + (activated ? "activated" : stopped ? "stopped" : "released"));
            }
            activated = true;
        }
        func = f;
        unlockFence();
    }

    @Override
    public void stopInvalidationNotifier() {
        synchronized (this) {
            if (revokedByCore) {
                return;
            }
            if (stopped || released) {
                throw new IllegalStateException("invalidation notifier of " + this + " already " + (stopped ? "stopped" : "released"));
            }
            stopped = true;
        }
        stopLocked();
    }

    /** The body of {@code ib_umem_stop_invalidation_notifier}. */
    private void stopLocked() {
        if (!fenceHeld || activated) {
            // activated, or a client without invalidation: take the lock (waits for a running invalidation)
            mappingLock.acquireUninterruptibly();
        }
        // else: a registration that never activated still holds the lock as the fence
        fenceHeld = false;
        func = null;
        MappedState cur = state;
        Step s;
        try {
            // without the flavour the core unmaps under the lock; with it, UNMAPPED is set under
            // the lock (a later invalidation cannot act) and the unmap comes after unlocking
            s = apply(Event.DEREGISTER, !client.unmapsOnInvalidate);
        } finally {
            mappingLock.release();
        }
        if (client.unmapsOnInvalidate && s.coreUnmaps() && cur == MappedState.MAPPED) {
            client.unmap(this);
        }
    }

    @Override
    public boolean invalidated() {
        return invalidated;
    }

    @Override
    public void release() {
        boolean stop;
        synchronized (this) {
            if (revokedByCore) {
                revokedByCore = false; // the driver's one release is accepted; a second is an error
                return;
            }
            if (released) {
                throw new IllegalStateException(this + " released twice");
            }
            stop = !stopped;
            stopped = true;
            released = true;
        }
        if (stop) {
            if (activated) {
                client.core.warn("driver released " + this + " without stopping its invalidation notifier first; stopping it now");
            }
            stopLocked();
        }
        client.releaseUmem(this);
    }

    /**
     * Revokes a live umem because the IB core is going away: the driver's function (if armed)
     * stops the device, the core unmaps, the client's context is released. The driver's later
     * stop/release only find an unmapped umem. Returns false if the umem was already released.
     */
    boolean revokeForShutdown() {
        synchronized (this) {
            if (released) {
                return false;
            }
            released = true;
            stopped = true;
            revokedByCore = true;
        }
        if (!fenceHeld || activated) {
            mappingLock.acquireUninterruptibly();
        }
        try {
            if (func != null && state == MappedState.MAPPED) {
                try {
                    func.invalidate(this);
                } catch (RuntimeException ex) {
                    client.core.warn("driver invalidate function of " + describe() + " threw " + ex);
                }
            }
            func = null;
            fenceHeld = false;
            apply(Event.DEREGISTER, true);
        } finally {
            mappingLock.release();
        }
        client.releaseUmem(this);
        return true;
    }

    boolean armed() {
        return func != null;
    }

    @Override
    public boolean isPeer() {
        return true;
    }

    @Override
    public String peerClientName() {
        return client.name();
    }

    @Override
    public long ticket() {
        return xaId;
    }

    @Override
    public String toString() {
        return "peer umem " + describe() + " (client " + client.name()
                + (xaId == PeerMemoryRegistry.NO_INVALIDATION_ID ? "" : ", ticket " + xaId) + ", " + state + ")";
    }
}
