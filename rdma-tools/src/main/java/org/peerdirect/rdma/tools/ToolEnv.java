package org.peerdirect.rdma.tools;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.ib.core.umem.PeerClaim;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * What every tool runs against, as a program finds it on a host: the RDMA devices
 * ({@code ibv_get_device_list}), the kernel that makes its process, the peer memory clients that
 * offer memory ({@code --mem}), and the IOMMU whose counters some tools report. One per
 * {@link RdmaTools} component; the device list and the kernel are fixed, the allocators and the
 * IOMMU come and go with their bundles (DS binds them dynamically: a copy-on-write list and a
 * volatile field, read without a lock by the tools' threads).
 */
final class ToolEnv {

    private final IbvDeviceList devices;
    private final Mm mm;
    private final List<PeerMemoryAllocator> allocators = new CopyOnWriteArrayList<>();
    private volatile Iommu iommu;
    /** The IB core's umem service, when bound: {@link Doctor} asks it which peer clients would claim a range. */
    private volatile UmemService umems;
    /** The GPUs' BAR1 views ({@link NvidiaBar1}) bound now: {@link Doctor} says whether GPU memory would find BAR1 space. */
    private final List<GpuBar1> gpus = new CopyOnWriteArrayList<>();

    ToolEnv(IbvDeviceList devices, Mm mm) {
        this.devices = devices;
        this.mm = mm;
    }

    IbvDeviceList devices() {
        return devices;
    }

    /** A fresh simulated process for one side of a tool (the tool exits it when done). */
    AddressSpace process(String name) {
        return mm.createProcess(name);
    }

    /** The live process {@code pid}, or null ({@link Doctor} looks at an existing process, not its own). */
    AddressSpace findProcess(int pid) {
        return mm.findProcess(pid);
    }

    void setUmems(UmemService u) {
        umems = u;
    }

    /** Forgets {@code u} only if it is still the one set. */
    void unsetUmems(UmemService u) {
        if (umems == u) {
            umems = null;
        }
    }

    /**
     * Each peer client's answer for the range as a driver that supports invalidation asks it
     * (mlx4 and mlx5 both do: {@code IB_PEER_MEM_ALLOW | IB_PEER_MEM_INVAL_SUPP}), or null
     * without the umem service.
     */
    List<PeerClaim> peerClaims(AddressSpace p, long addr, long length) {
        UmemService u = umems;
        return u == null ? null : u.peerClaims(p, addr, length, UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
    }

    void addGpuBar1(GpuBar1 g) {
        gpus.add(g);
    }

    void removeGpuBar1(GpuBar1 g) {
        gpus.remove(g);
    }

    /** The GPU whose memory [addr, addr+length) of {@code pid} is, with its BAR1 now; null when it is none's (or no GPU driver is bound). */
    GpuBar1.Bar1 gpuBar1(int pid, long addr, long length) {
        for (GpuBar1 g : gpus) {
            GpuBar1.Bar1 b = g.bar1(pid, addr, length);
            if (b != null) {
                return b;
            }
        }
        return null;
    }

    /** What a tool does with a device's context in a process of its own. */
    @FunctionalInterface
    interface ContextWork<T, X extends Exception> {
        T apply(AddressSpace process, IbvContext context) throws X;
    }

    /**
     * {@code work} on a context of {@code d} opened by a fresh process {@code name}, as a program
     * that opens the device, asks, and exits: the context is closed and the process gone when
     * this returns, also when {@code work} fails.
     */
    <T, X extends Exception> T withContext(IbvDevice d, String name, ContextWork<T, X> work) throws X {
        AddressSpace p = process(name);
        try (IbvContext c = d.open(p)) {
            return work.apply(p, c);
        } finally {
            p.exit();
        }
    }

    /** The peer clients offering memory now, in the order they came. */
    List<PeerMemoryAllocator> allocators() {
        return allocators;
    }

    void addAllocator(PeerMemoryAllocator a) {
        allocators.add(a);
    }

    void removeAllocator(PeerMemoryAllocator a) {
        allocators.remove(a);
    }

    void setIommu(Iommu i) {
        iommu = i;
    }

    /** Forgets {@code i} only if it is still the one set (DS may bind the next before unbinding the last). */
    void unsetIommu(Iommu i) {
        if (iommu == i) {
            iommu = null;
        }
    }

    /** 2 MiB entries in every IOMMU domain now, or -1 without an IOMMU. */
    long superpages() {
        Iommu i = iommu;
        return i == null ? -1 : i.domains().stream().mapToLong(IommuDomain::mappedSuperpages).sum();
    }

    /** The IOMMU's peer-to-peer byte count now (bytes that crossed PCI BARs), or -1 without an IOMMU. */
    long barBytes() {
        Iommu i = iommu;
        return i == null ? -1 : i.barBytes();
    }
}
