package org.peerdirect.gpu.peermem;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import org.peerdirect.gpu.nvidia.NvidiaP2pDmaMapping;
import org.peerdirect.gpu.nvidia.NvidiaP2pPageTable;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.module.KernelModule;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * nvidia-peermem ({@code kernel-open/nvidia-peermem/nvidia-peermem.c}): the peer-memory client
 * through which the IB core registers GPU memory, over the RM's {@code nv-p2p} API.
 *
 * <ul>
 * <li>{@code acquire} rounds the range to 64 KiB and probes ownership with a pin immediately put
 * back ({@code nvidia_p2p_get_pages} + {@code nvidia_p2p_put_pages}); any failure is "not mine".
 * <li>{@code get_pages} pins the rounded range: the persistent API for the persistent client, or
 * with this client's free callback for the invalidating one.
 * <li>{@code dma_map} requires 64 KiB pages ("assumption of 64KB pages failed") and returns one
 * 64 KiB entry per GPU page, a bus address of the GPU's BAR1 in the peer's IOMMU domain.
 * <li>{@code dma_unmap}/{@code put_pages} do nothing on the thread running the free callback
 * ({@code callback_task == current}), and nothing once the RM tore the pin down after that
 * callback; otherwise they unmap and unpin.
 * <li>The free callback ({@code nv_get_p2p_free_callback}) marks the thread, calls the IB core's
 * invalidate with the ticket, and returns; the RM then unmaps on its own.
 * </ul>
 *
 * <p>Module reference: every acquire takes a reference on the module ({@code __module_get}; here
 * {@code try_module_get}, so a module being removed claims nothing) and release drops it, so
 * {@code kernel:rmmod nvidia_peermem} refuses with EBUSY while an MR uses the GPU's memory;
 * {@link #inUse()} counts this client's registrations (the module counts those of both clients).
 * A bundle stopped by force waits in the core's unregister until the registrations are gone.
 *
 * <p>Lock rules: the client holds no lock of its own while it calls the core's invalidate, and the
 * RM calls the free callback without its lock, so a registration blocked in the core's fence can
 * never hold up the callback that the fence is waiting on (nv_peer_memory#92).
 */
public final class NvPeerMem implements PeerMemoryClient {

    /** {@code GPU_PAGE_SIZE}. */
    public static final long GPU_PAGE_SIZE = NvidiaRm.P2P_PAGE_SIZE;

    /** One registration: from acquire to release ({@code struct nv_mem_context}). */
    static final class Context {
        final NvidiaRm rm;
        final int pid;
        final long start;
        final long length;
        long coreContext;
        NvidiaP2pPageTable pageTable;
        NvidiaP2pDmaMapping mapping;
        /** {@code callback_task}: the thread inside the free callback, whose unmap calls are no-ops. */
        volatile Thread callbackTask;

        Context(NvidiaRm rm, int pid, long start, long length) {
            this.rm = rm;
            this.pid = pid;
            this.start = start;
            this.length = length;
        }
    }

    private final String name;
    private final Supplier<List<NvidiaRm>> gpus;
    private final boolean persistent;
    private final int flags;
    private final AtomicInteger refs = new AtomicInteger();
    private final KernelModule module;
    private volatile PeerMemoryRegistration registration;

    /**
     * @param persistent the persistent client (no invalidation callback: register it without one)
     * @param unmaps     the "ex" client's {@link #INVALIDATE_UNMAPS} flag (invalidating client only)
     */
    public NvPeerMem(String name, Supplier<List<NvidiaRm>> gpus, boolean persistent, boolean unmaps) {
        this(name, gpus, persistent, unmaps, new KernelModule("nvidia_peermem"));
    }

    /** @param module the module the client's code is in ({@code THIS_MODULE}): acquire holds a reference on it */
    public NvPeerMem(String name, Supplier<List<NvidiaRm>> gpus, boolean persistent, boolean unmaps, KernelModule module) {
        this.module = module;
        this.name = name;
        this.gpus = gpus;
        this.persistent = persistent;
        this.flags = unmaps && !persistent ? INVALIDATE_UNMAPS : 0;
    }

    public boolean persistent() {
        return persistent;
    }

    /** This client's registrations between acquire and release (each holds a module reference). */
    public int inUse() {
        return refs.get();
    }

    /** The module the client is in. */
    public KernelModule module() {
        return module;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String version() {
        return "1.1";
    }

    @Override
    public int flags() {
        return flags;
    }

    @Override
    public void registered(PeerMemoryRegistration r) {
        registration = r;
    }

    @Override
    public Object acquire(int pid, long addr, long size) {
        long start = addr & -GPU_PAGE_SIZE;
        long end = (addr + size + GPU_PAGE_SIZE - 1) & -GPU_PAGE_SIZE;
        if (size <= 0 || end <= start) {
            return null;
        }
        for (NvidiaRm rm : gpus.get()) {
            try {
                NvidiaP2pPageTable probe = persistent ? rm.getPagesPersistent(pid, start, end - start)
                        : rm.getPages(pid, start, end - start, () -> {
                            // nv_mem_dummy_callback: the probe is put right away
                        });
                if (persistent) {
                    rm.putPagesPersistent(probe);
                } else {
                    rm.putPages(probe);
                }
            } catch (KernelException notMine) {
                continue; // "Error case handled as not mine"
            }
            if (!module.tryModuleGet()) {
                return null; // rmmod is removing the module: it claims nothing more
            }
            refs.incrementAndGet();
            return new Context(rm, pid, start, end - start);
        }
        return null;
    }

    @Override
    public void getPages(long addr, long size, boolean write, boolean force, Object clientContext, long coreContext) {
        Context c = (Context) clientContext;
        c.coreContext = coreContext;
        c.pageTable = persistent ? c.rm.getPagesPersistent(c.pid, c.start, c.length)
                : c.rm.getPages(c.pid, c.start, c.length, () -> freeCallback(c));
    }

    @Override
    public SgTable dmaMap(Object clientContext, DmaDevice device) {
        Context c = (Context) clientContext;
        if (c.pageTable.pageSize() != GPU_PAGE_SIZE) {
            throw new KernelException(Errno.EINVAL, name + ": assumption of 64KB pages failed");
        }
        NvidiaP2pDmaMapping m = c.rm.dmaMapPages(device.dma(), c.pageTable);
        long[] addrs = new long[m.entries()];
        long[] lens = new long[m.entries()];
        for (int i = 0; i < addrs.length; i++) {
            addrs[i] = m.dmaAddress(i);
            lens[i] = GPU_PAGE_SIZE;
        }
        c.mapping = m;
        return SgTable.of(addrs, lens);
    }

    @Override
    public void dmaUnmap(SgTable sg, Object clientContext, DmaDevice device) {
        Context c = (Context) clientContext;
        if (c.callbackTask == Thread.currentThread() || c.mapping == null) {
            return; // inside the free callback: the RM unmaps after it returns
        }
        c.rm.dmaUnmapPages(c.mapping);
    }

    @Override
    public void putPages(SgTable sg, Object clientContext) {
        Context c = (Context) clientContext;
        if (c.callbackTask == Thread.currentThread() || c.pageTable == null) {
            return;
        }
        if (persistent) {
            c.rm.putPagesPersistent(c.pageTable);
        } else {
            c.rm.putPages(c.pageTable); // returns quietly if the RM already tore it down
        }
    }

    @Override
    public long getPageSize(Object clientContext) {
        return GPU_PAGE_SIZE;
    }

    @Override
    public void release(Object clientContext) {
        refs.decrementAndGet();
        module.modulePut();
    }

    /**
     * {@code nv_get_p2p_free_callback}: the application freed the memory (or exited) while the
     * registration still held it. Invalidate through the core; when this returns the HCA no longer
     * reaches the pages and the RM unmaps them.
     */
    private void freeCallback(Context c) {
        PeerMemoryRegistration r = registration;
        c.callbackTask = Thread.currentThread();
        try {
            if (r != null) {
                r.invalidate(c.coreContext);
            }
        } finally {
            c.callbackTask = null;
        }
    }
}
