package org.peerdirect.ib.core.impl;

import java.util.Comparator;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.ib.core.objects.UverbsObjects;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.uverbs.IbDevice;
import org.peerdirect.ib.core.uverbs.UverbsSnapshot;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.sysfs.Sysfs;

/**
 * The device registry ({@code ib_register_device} / {@code ib_unregister_device} /
 * {@code ibv_get_device_list}): drivers publish {@link IbDeviceOps} services; for each the core
 * publishes the user-facing {@link IbvDevice} (property {@value IbvDevice#NAME_PROPERTY}), the way
 * {@code ib_client}s are told of a new device. When a driver's service goes, the user-facing service
 * goes first, then the device is disassociated (every later verb EIO), before the driver tears its
 * hardware down.
 */
@Component(service = {IbvDeviceList.class, UverbsObjects.class}, immediate = true)
public final class DeviceRegistry implements IbvDeviceList, UverbsObjects {

    private final BundleContext ctx;
    /** The devices, listed before their service is published: a user who sees the service finds the device. */
    private final Map<IbDeviceOps, IbDevice> devices = new ConcurrentHashMap<>();
    private final Map<IbDeviceOps, ServiceRegistration<IbvDevice>> registrations = new ConcurrentHashMap<>();
    /** Each device's {@code /sys/class/infiniband/<dev>} attributes. */
    private final Map<IbDeviceOps, IbSysfs> sysfsDirs = new ConcurrentHashMap<>();
    private final Sysfs sysfs;

    @Activate
    public DeviceRegistry(BundleContext ctx, @Reference Sysfs sysfs) {
        this.ctx = ctx;
        this.sysfs = sysfs;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "removeDevice")
    void addDevice(IbDeviceOps ops) {
        IbDevice dev = new IbDevice(ops);
        Dictionary<String, Object> props = new Hashtable<>();
        props.put(IbvDevice.NAME_PROPERTY, ops.name());
        props.put("ib.device.driver", ops.driver());
        devices.put(ops, dev);
        IbSysfs dir = new IbSysfs(sysfs, ops, ops.queryDevice());
        sysfsDirs.put(ops, dir);
        dev.setPortListener(dir::portEvent);
        registrations.put(ops, ctx.registerService(IbvDevice.class, dev, props));
    }

    void removeDevice(IbDeviceOps ops) {
        ServiceRegistration<IbvDevice> reg = registrations.remove(ops);
        if (reg != null) {
            try {
                reg.unregister();
            } catch (IllegalStateException alreadyGone) {
                // unregistered with the stopping bundle
            }
        }
        IbDevice dev = devices.remove(ops);
        if (dev != null) {
            dev.setPortListener(null);
            dev.disassociate();
        }
        IbSysfs dir = sysfsDirs.remove(ops);
        if (dir != null) {
            dir.remove();
        }
    }

    @Deactivate
    void deactivate() {
        for (IbDeviceOps ops : List.copyOf(devices.keySet())) {
            removeDevice(ops);
        }
    }

    @Override
    public List<IbvDevice> devices() {
        return devices.values().stream().filter(d -> !d.removed()).map(d -> (IbvDevice) d)
                .sorted(Comparator.comparing(IbvDevice::name)).toList();
    }

    /** {@code rdma resource show}: every device's open contexts, by device name. */
    @Override
    public List<UverbsObjects.Context> contexts() {
        return devices.values().stream().filter(d -> !d.removed()).sorted(Comparator.comparing(IbDevice::name))
                .flatMap(d -> UverbsSnapshot.of(d).stream()).toList();
    }

    @Override
    public IbvDevice device(String name) {
        List<IbvDevice> all = devices();
        if (all.isEmpty()) {
            throw new KernelException(Errno.ENODEV, "no RDMA devices (is a provider bundle such as mlx4-provider started?)");
        }
        if (name == null) {
            return all.get(0);
        }
        return all.stream().filter(d -> d.name().equals(name)).findFirst().orElseThrow(() -> new KernelException(Errno.ENODEV,
                "no RDMA device " + name + " (devices: " + all.stream().map(IbvDevice::name).toList() + ")"));
    }
}
