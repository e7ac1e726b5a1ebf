package org.peerdirect.ib.core.provider;

import java.util.Map;

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

    /**
     * The port's PMA counters ({@code process_mad} answering PortCounters and
     * PortCountersExtended, as {@code drivers/infiniband/core/sysfs.c}'s {@code show_pma_counter}
     * asks for them): by the sysfs file names ({@code port_xmit_data}, {@code port_rcv_packets},
     * {@code unicast_xmit_packets}, {@code symbol_error}, ...), values as the MAD carries them
     * (the data counters in 4-byte words). Called on each read of a {@code counters/} file, from
     * any thread, never with a lock of the core held. A driver without counters keeps the default:
     * no files.
     *
     * @since 0.9
     */
    default Map<String, Long> queryPmaCounters(int port) {
        return Map.of();
    }

    /**
     * The port's driver counters ({@code get_hw_stats} over the names of
     * {@code alloc_hw_port_stats}: the {@code hw_counters/} files, e.g. mlx5's
     * {@code out_of_sequence}, {@code duplicate_request}, {@code rnr_nak_retry_err}), by name in the
     * driver's order. Same calling rules as {@link #queryPmaCounters}; the default: no files.
     *
     * @since 0.9
     */
    default Map<String, Long> getHwStats(int port) {
        return Map.of();
    }

    /**
     * {@code get_netdev} ({@code ib_device_get_netdev}): the network device behind Ethernet port
     * {@code port} (the core checks the range), read fresh from the hardware, for
     * {@code rdma link show}; null for a port with none (InfiniBand), the default.
     *
     * @since 0.10
     */
    default org.peerdirect.ib.core.verbs.IbvNetdev getNetdev(int port) {
        return null;
    }
}
