package org.peerdirect.ib.core.verbs;

import java.util.List;

import org.osgi.annotation.versioning.ProviderType;

/** {@code ibv_get_device_list}, published by ib-core: the devices registered now, by name. */
@ProviderType
public interface IbvDeviceList {

    /** The registered devices, sorted by name. */
    List<IbvDevice> devices();

    /**
     * The device called {@code name}, or the first one when {@code name} is null.
     *
     * @throws org.peerdirect.kernel.mm.KernelException ENODEV when there is no such device
     */
    IbvDevice device(String name);
}
