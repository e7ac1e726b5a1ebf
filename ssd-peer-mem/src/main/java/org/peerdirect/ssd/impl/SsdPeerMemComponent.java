package org.peerdirect.ssd.impl;

import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.module.KernelModules;
import org.peerdirect.kernel.pci.BoundDevices;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.ssd.nvme.NvmePmr;
import org.peerdirect.ssd.peermem.SsdPeerMem;

/**
 * Registers the {@code ssd_mem} client (with invalidation) and offers the SSDs' persistent
 * memory regions to tools ({@code --mem ssd_mem}, {@code --mem ssd_mem:1} for nvme1): {@code alloc}
 * maps the lowest free PMR range of the SSD named (0 by default), {@code map} a fixed PMR offset of
 * SSD 0 (the same bytes in every run), {@code free} and dma-buf export find the SSD from the address. CPU copies
 * are plain loads and stores: a PMR is CPU-addressable. Deactivation unregisters the client,
 * which waits until no MR uses it. The bundle is the module {@code ssd_peer_mem}: a registration
 * holds a reference, so {@code kernel:rmmod ssd_peer_mem} refuses while MRs use the SSD.
 */
@Component(immediate = true, service = {PeerMemoryAllocator.class, SsdPeerMemComponent.class})
public final class SsdPeerMemComponent implements PeerMemoryAllocator {

    private final Mm mm;
    private final BoundDevices<NvmePmr> ssds = new BoundDevices<>(NvmePmr::index);
    private final SsdPeerMem client;
    private final PeerMemoryRegistration registration;

    @Activate
    public SsdPeerMemComponent(@Reference PeerMemoryRegistry registry, @Reference Mm mm, @Reference KernelModules modules) {
        this.mm = mm;
        this.client = new SsdPeerMem(this::ssds, modules.load(SsdPeerMem.MODULE));
        this.registration = registry.register(client, true);
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, unbind = "removeSsd")
    void addSsd(NvmePmr pmr) {
        ssds.add(pmr);
    }

    void removeSsd(NvmePmr pmr) {
        ssds.remove(pmr);
    }

    /** The SSDs, in index order. */
    public List<NvmePmr> ssds() {
        return ssds.all();
    }

    public SsdPeerMem client() {
        return client;
    }

    @Deactivate
    void deactivate() {
        registration.unregister(); // waits until no MR uses the client
    }

    /** SSD {@code index} (nvme{@code index}); ENODEV naming the SSDs there are. */
    private NvmePmr ssd(int index) {
        List<NvmePmr> all = ssds();
        if (index < 0 || index >= all.size()) {
            throw new KernelException(Errno.ENODEV, SsdPeerMem.NAME + ": no SSD " + index + " with a persistent memory region ("
                    + (all.isEmpty() ? "none" : all.size() + " SSD(s): nvme0.." + "nvme" + (all.size() - 1)) + ")");
        }
        return all.get(index);
    }

    /** The SSD whose PMR maps [va, va+1) of process {@code pid}; SSD 0 when none does (its call then refuses the address in its own words). */
    private NvmePmr owner(int pid, long va) {
        for (NvmePmr p : ssds()) {
            if (p.owns(pid, va, 1)) {
                return p;
            }
        }
        return ssd(0);
    }

    @Override
    public int devices() {
        return ssds.size();
    }

    @Override
    public String name() {
        return SsdPeerMem.NAME;
    }

    @Override
    public long alloc(int pid, long size) {
        return alloc(pid, size, 0);
    }

    @Override
    public long alloc(int pid, long size, int device) {
        return ssd(device).alloc(mm.process(pid), size);
    }

    @Override
    public long map(int pid, long deviceOffset, long size) {
        return ssd(0).mmap(mm.process(pid), deviceOffset, (size + NvmePmr.PAGE - 1) & -NvmePmr.PAGE);
    }

    @Override
    public int exportDmabuf(int pid, long addr, long size) {
        return owner(pid, addr).exportDmabuf(mm.process(pid), addr, size);
    }

    @Override
    public void free(int pid, long addr) {
        owner(pid, addr).munmap(pid, addr);
    }
}
