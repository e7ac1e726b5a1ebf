package org.peerdirect.ib.core.standalone;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.ib.core.impl.IbSysfs;
import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.umem.impl.UmemCore;
import org.peerdirect.ib.core.uverbs.IbDevice;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.sysfs.Sysfs;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * One IB core instance wired by hand: what the bundle's registry, umem and device-registry
 * components do, for code that runs outside a framework. {@link #close} revokes what is still
 * registered, as stopping the bundle does.
 */
@ProviderType
public final class IbCore implements AutoCloseable {

    private final PeerMemoryController controller;
    private final UmemService umems;
    private final Map<IbDeviceOps, IbDevice> devices = new ConcurrentHashMap<>();
    private final Sysfs sysfs;
    /** Each registered device's {@code class/infiniband/<dev>/} attributes, when there is a sysfs. */
    private final Map<IbDeviceOps, IbSysfs> sysfsDirs = new ConcurrentHashMap<>();

    /** A core whose peer-memory statistics and devices' attributes go to {@code sysfs} (may be null: none). */
    public IbCore(Sysfs sysfs) {
        this.sysfs = sysfs;
        controller = new PeerMemoryController(sysfs, null);
        umems = new UmemCore(controller);
    }

    /** {@code ib_register_peer_memory_client} and the rest of the registry. */
    public PeerMemoryRegistry peerMemory() {
        return controller;
    }

    /** Clients registered now, in brokering order. */
    public List<PeerMemoryRegistration> peerClients() {
        return controller.clients();
    }

    /** {@code ib_umem_get} for drivers. */
    public UmemService umems() {
        return umems;
    }

    /** {@code ib_register_device}: the user-facing device for a driver's device. */
    public IbvDevice register(IbDeviceOps ops) {
        return devices.computeIfAbsent(ops, o -> {
            IbDevice d = new IbDevice(o);
            if (sysfs != null) { // as the OSGi registry does: class/infiniband/<dev>/, port state after the port events
                IbSysfs dir = new IbSysfs(sysfs, o, o.queryDevice(), 0); // no mirror here: each counter read asks the driver
                sysfsDirs.put(o, dir);
                d.setPortListener(dir::portEvent);
            }
            return d;
        });
    }

    /** {@code ib_unregister_device}: disassociates the device's users (EIO, MRs deregistered). */
    public void unregister(IbDeviceOps ops) {
        IbDevice d = devices.remove(ops);
        if (d != null) {
            d.disassociate();
        }
        IbSysfs dir = sysfsDirs.remove(ops);
        if (dir != null) {
            dir.remove();
        }
    }

    /** Contexts still open on the device. */
    public int openContexts(IbvDevice dev) {
        return dev instanceof IbDevice d ? d.openContexts() : 0;
    }

    /** Unregisters every device, then closes the controller, revoking live registrations after {@code grace}. */
    public void close(Duration grace) {
        for (IbDeviceOps ops : List.copyOf(devices.keySet())) {
            unregister(ops);
        }
        controller.close(grace);
    }

    @Override
    public void close() {
        close(Duration.ofSeconds(1));
    }
}
