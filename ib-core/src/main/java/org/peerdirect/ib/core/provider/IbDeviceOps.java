package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * One RDMA device a driver drives ({@code struct ib_device} with its device-level
 * {@code ib_device_ops}). Published by the driver as an OSGi service; the core registers the
 * user-facing device for it.
 */
@ConsumerType
public interface IbDeviceOps {

    /** The device name, e.g. {@code mlx4_0}. */
    String name();

    /** The driver, e.g. {@code mlx4} ({@code ib_device_ops.driver_id}). */
    String driver();

    /** {@code node_guid}. */
    long nodeGuid();

    /** {@code query_device}: the attributes, ODP capabilities included. The core checks requests against them. */
    IbvDeviceAttr queryDevice();

    /** {@code query_port} (ports from 1; the core checks the range). */
    IbvPortAttr queryPort(int port);

    /** {@code query_gid}. */
    String queryGid(int port, int index);

    /** {@code alloc_ucontext}: the driver's context for {@code process}. */
    IbUcontextOps allocUcontext(AddressSpace process);

    /**
     * The core's dispatcher of this device's port events, given when the core registers the device
     * and taken back (null) when it disassociates it. A driver without port events keeps the default.
     */
    default void setEventHandler(IbDeviceEvents events) {
    }
}
