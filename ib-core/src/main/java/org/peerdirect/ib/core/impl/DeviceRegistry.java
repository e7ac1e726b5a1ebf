package org.peerdirect.ib.core.impl;

import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The device registry ({@code ib_register_device} / {@code ibv_get_device_list}): providers
 * publish {@link IbvDevice} services; users see them come and go here.
 */
@Component(service = IbvDeviceList.class, immediate = true)
public final class DeviceRegistry implements IbvDeviceList {

    private final List<IbvDevice> devices = new CopyOnWriteArrayList<>();

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "removeDevice")
    void addDevice(IbvDevice d) {
        devices.add(d);
    }

    void removeDevice(IbvDevice d) {
        devices.remove(d);
    }

    @Override
    public List<IbvDevice> devices() {
        return devices.stream().filter(d -> !d.removed()).sorted(Comparator.comparing(IbvDevice::name)).toList();
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
