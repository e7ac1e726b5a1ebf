package org.peerdirect.ssd.peermem;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.module.KernelModule;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.ssd.nvme.NvmePmr;

/**
 * {@code ssd_mem}: the peer-memory client through which the IB core registers an SSD's persistent
 * memory region mapped into a process, so an RDMA adapter writes straight into the SSD
 * (peer-to-peer, through the PMR BAR in the adapter's IOMMU domain). An invalidating client: a
 * range unmapped (or its process gone, or the SSD removed) while registered is invalidated through
 * the core before the mapping goes, and the core unmaps and unpins.
 *
 * <p>Module reference: every acquire takes one on the client's module ({@code try_module_get}: a
 * module being removed claims nothing), release drops it, so {@code kernel:rmmod ssd_peer_mem}
 * refuses with EBUSY while an MR uses the SSD; {@link #inUse()} counts the registrations. A bundle
 * stopped by force waits in the core's unregister for the MRs to go.
 *
 * <p>Lock rules: the client holds no lock of its own; the driver calls the invalidation without
 * its lock (see {@link NvmePmr}).
 */
public final class SsdPeerMem implements PeerMemoryClient {

    public static final String NAME = "ssd_mem";
    /** The module the client is in, as kernel:lsmod shows it. */
    public static final String MODULE = "ssd_peer_mem";

    /** One registration ({@code acquire} to {@code release}). */
    static final class Context {
        final NvmePmr pmr;
        final int pid;
        final long start;
        final long length;
        long coreContext;
        NvmePmr.Pin pin;
        NvmePmr.Mapping mapping;

        Context(NvmePmr pmr, int pid, long start, long length) {
            this.pmr = pmr;
            this.pid = pid;
            this.start = start;
            this.length = length;
        }
    }

    private final Supplier<List<NvmePmr>> ssds;
    private final AtomicInteger refs = new AtomicInteger();
    private final KernelModule module;
    private volatile PeerMemoryRegistration registration;

    public SsdPeerMem(Supplier<List<NvmePmr>> ssds) {
        this(ssds, new KernelModule(MODULE));
    }

    /** @param module the module the client is in: every registration holds a reference on it */
    public SsdPeerMem(Supplier<List<NvmePmr>> ssds, KernelModule module) {
        this.ssds = ssds;
        this.module = module;
    }

    /** Registrations between acquire and release (each holds a module reference). */
    public int inUse() {
        return refs.get();
    }

    public KernelModule module() {
        return module;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String version() {
        return "1.0";
    }

    @Override
    public void registered(PeerMemoryRegistration r) {
        registration = r;
    }

    @Override
    public Object acquire(int pid, long addr, long size) {
        long start = addr & -NvmePmr.PAGE;
        long end = (addr + size + NvmePmr.PAGE - 1) & -NvmePmr.PAGE;
        if (size <= 0 || end <= start) {
            return null;
        }
        for (NvmePmr pmr : ssds.get()) {
            if (pmr.owns(pid, start, end - start)) {
                if (!module.tryModuleGet()) {
                    return null; // rmmod is removing the module: it claims nothing more
                }
                refs.incrementAndGet();
                return new Context(pmr, pid, start, end - start);
            }
        }
        return null;
    }

    @Override
    public void getPages(long addr, long size, boolean write, boolean force, Object clientContext, long coreContext) {
        Context c = (Context) clientContext;
        c.coreContext = coreContext;
        c.pin = c.pmr.pin(c.pid, c.start, c.length, () -> invalidate(c));
    }

    @Override
    public SgTable dmaMap(Object clientContext, DmaDevice device) {
        Context c = (Context) clientContext;
        if (c.pin == null) {
            throw new KernelException(Errno.EINVAL, NAME + ": dma_map without get_pages");
        }
        c.mapping = c.pmr.dmaMap(c.pin, device.dma());
        return SgTable.of(new long[] {c.mapping.iova()}, new long[] {c.pin.length()});
    }

    @Override
    public void dmaUnmap(SgTable sg, Object clientContext, DmaDevice device) {
        Context c = (Context) clientContext;
        if (c.mapping != null) {
            c.pmr.dmaUnmap(c.mapping);
        }
    }

    @Override
    public void putPages(SgTable sg, Object clientContext) {
        Context c = (Context) clientContext;
        if (c.pin != null) {
            c.pmr.unpin(c.pin);
        }
    }

    @Override
    public long getPageSize(Object clientContext) {
        return NvmePmr.PAGE;
    }

    @Override
    public void release(Object clientContext) {
        refs.decrementAndGet();
        module.modulePut();
    }

    /** The range goes while registered: the core revokes the MR, then unmaps and unpins through us. */
    private void invalidate(Context c) {
        PeerMemoryRegistration r = registration;
        if (r != null) {
            r.invalidate(c.coreContext);
        }
    }
}
