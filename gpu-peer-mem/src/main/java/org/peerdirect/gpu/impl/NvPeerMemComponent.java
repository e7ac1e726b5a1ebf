package org.peerdirect.gpu.impl;

import java.util.ArrayList;
import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.gpu.peermem.NvPeerMem;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.module.KernelModule;
import org.peerdirect.kernel.module.KernelModules;
import org.peerdirect.kernel.pci.BoundDevices;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;

/**
 * {@code nvidia-peermem.ko}'s init and exit: registers the clients its module parameters choose
 * (Configuration Admin PID {@code org.peerdirect.nvidia_peermem}):
 * <ul>
 * <li>default ({@code persistent_api_support=1}): only the persistent client, named {@code nv_mem},
 * without an invalidation callback;
 * <li>{@code persistent_api_support=0}: {@code nv_mem} with the free callback (the "ex" client with
 * {@code INVALIDATE_UNMAPS}, unless {@code peerdirect_support=1}, the legacy MLNX_OFED 4.9 form),
 * then {@code nv_mem_nc}, persistent. The core tries clients in registration order and mlx5
 * supports invalidation, so its MRs get {@code nv_mem}.
 * </ul>
 * The bundle is the module {@code nvidia_peermem}: every registration holds a reference on it, so
 * {@code kernel:rmmod nvidia_peermem} refuses while MRs use GPU memory.
 * A new configuration is taken in place ({@code rmmod} and {@code modprobe} with the new
 * parameters, without re-creating the component or its services): one that names other clients
 * unregisters the old ones (waiting, as the unload does, until no MR uses them) and registers the
 * new; an unchanged one (e.g. Configuration Admin's delivery after the guard put back a rejected
 * value) changes nothing.
 * Also offers the GPU's memory to tools ({@code --mem nv_mem}) as cudaMalloc does for
 * {@code perftest --use_cuda}: allocations on GPU 0, copies by the copy engine. Deactivation
 * unregisters the clients, which waits until no MR uses them (a module in use cannot go).
 */
@Component(immediate = true, configurationPid = NvPeerMemComponent.PID, service = {PeerMemoryAllocator.class, NvPeerMemComponent.class})
@Designate(ocd = NvPeerMemComponent.Config.class)
public final class NvPeerMemComponent implements PeerMemoryAllocator {

    public static final String PID = "org.peerdirect.nvidia_peermem";
    /** The module's name, as lsmod shows {@code nvidia-peermem.ko}. */
    public static final String MODULE = "nvidia_peermem";

    @ObjectClassDefinition(name = "nvidia-peermem", description = "The module parameters of nvidia-peermem")
    @interface Config {
        @AttributeDefinition(min = "0", max = "1", description = "1 (default): only the persistent client nv_mem; 0: nv_mem with the free callback plus nv_mem_nc")
        int persistent__api__support() default 1; // "persistent_api_support", the module parameter's name

        @AttributeDefinition(min = "0", max = "1", description = "1: the legacy invalidating client (no INVALIDATE_UNMAPS, as for MLNX_OFED 4.9); default 0")
        int peerdirect__support() default 0; // "peerdirect_support"
    }

    private final Mm mm;
    private final PeerMemoryRegistry registry;
    private final KernelModule module;
    private final BoundDevices<NvidiaRm> gpus = new BoundDevices<>(NvidiaRm::index);
    /** Guarded by this: the clients of the parameters in force, their registrations, and those parameters. */
    private final List<NvPeerMem> clients = new ArrayList<>();
    private final List<PeerMemoryRegistration> registrations = new ArrayList<>();
    private int persistentApiSupport;
    private int peerdirectSupport;

    @Activate
    public NvPeerMemComponent(@Reference PeerMemoryRegistry registry, @Reference Mm mm, @Reference KernelModules modules, Config c) {
        this.mm = mm;
        this.registry = registry;
        this.module = modules.load(MODULE); // THIS_MODULE: both clients are in it
        synchronized (this) {
            register(c);
        }
    }

    /** New module parameters: the clients they name, unless they name the ones registered now. */
    @Modified
    synchronized void modified(Config c) {
        if (c.persistent__api__support() == persistentApiSupport && c.peerdirect__support() == peerdirectSupport) {
            return;
        }
        unregisterAll();
        register(c);
    }

    /** nvidia_peermem's init: the clients {@code c} names, registered in order (the core tries them in that order). */
    private void register(Config c) {
        assert Thread.holdsLock(this);
        persistentApiSupport = c.persistent__api__support();
        peerdirectSupport = c.peerdirect__support();
        if (persistentApiSupport != 0) {
            clients.add(new NvPeerMem("nv_mem", this::gpus, true, false, module));
        } else {
            clients.add(new NvPeerMem("nv_mem", this::gpus, false, peerdirectSupport == 0, module));
            clients.add(new NvPeerMem("nv_mem_nc", this::gpus, true, false, module));
        }
        try {
            for (NvPeerMem client : clients) {
                registrations.add(registry.register(client, !client.persistent()));
            }
        } catch (RuntimeException e) {
            unregisterAll();
            throw e;
        }
    }

    /** nvidia_peermem's exit: unregisters the clients, the last first; each waits until no MR uses it. */
    private void unregisterAll() {
        assert Thread.holdsLock(this);
        for (int i = registrations.size() - 1; i >= 0; i--) {
            registrations.get(i).unregister(); // waits until no MR uses the client
        }
        registrations.clear();
        clients.clear();
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, unbind = "removeGpu")
    void addGpu(NvidiaRm rm) {
        gpus.add(rm);
    }

    void removeGpu(NvidiaRm rm) {
        gpus.remove(rm);
    }

    /** The GPUs, in index order. */
    public List<NvidiaRm> gpus() {
        return gpus.all();
    }

    public synchronized List<NvPeerMem> clients() {
        return List.copyOf(clients);
    }

    @Deactivate
    synchronized void deactivate() {
        unregisterAll();
    }

    // ------------------------------------------------------------------ memory for tools
    // allocations on the GPU asked for (0 by default); the rest finds the GPU from the address

    @Override
    public String name() {
        return "nv_mem";
    }

    @Override
    public int devices() {
        return gpus.size();
    }

    @Override
    public long alloc(int pid, long size) {
        return alloc(pid, size, 0);
    }

    @Override
    public long alloc(int pid, long size, int device) {
        return NvidiaRm.device(gpus.all(), device).cuMemAlloc(mm.process(pid), size);
    }

    @Override
    public int exportDmabuf(int pid, long addr, long size) {
        return owner(pid, addr, size, "cuMemGetHandleForAddressRange").cuMemGetHandleForAddressRange(mm.process(pid), addr, size);
    }

    @Override
    public void free(int pid, long addr) {
        owner(pid, addr, 1, "cuMemFree").cuMemFree(mm.process(pid), addr);
    }

    @Override
    public void copyToDevice(AddressSpace proc, long addr, byte[] src, int off, int len) {
        owner(proc.pid(), addr, Math.max(1, len), "cuMemcpyHtoD").cuMemcpyHtoD(proc, addr, src, off, len);
    }

    @Override
    public void copyFromDevice(AddressSpace proc, long addr, byte[] dst, int off, int len) {
        owner(proc.pid(), addr, Math.max(1, len), "cuMemcpyDtoH").cuMemcpyDtoH(proc, dst, off, addr, len);
    }

    private NvidiaRm owner(int pid, long addr, long len, String what) {
        return NvidiaRm.owner(gpus.all(), pid, addr, len, what);
    }
}
