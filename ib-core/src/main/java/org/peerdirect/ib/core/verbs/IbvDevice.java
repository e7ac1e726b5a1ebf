package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * {@code struct ibv_device}: an RDMA device a provider registered, published as an OSGi service
 * with the property {@value #NAME_PROPERTY}. The service goes away when the device is removed
 * (hot-unplug, provider stopped); from then on every object of it fails with EIO, its QPs are in
 * the error state with their work flushed, and its MRs are revoked.
 */
@ProviderType
public interface IbvDevice {

    /** Service property: the device name, e.g. {@code mlx4_0}. */
    String NAME_PROPERTY = "ib.device.name";

    /** {@code ibv_get_device_name}. */
    String name();

    /** {@code ibv_get_device_guid}. */
    long nodeGuid();

    /** The driver, e.g. {@code mlx4}. */
    String driver();

    /** {@code ibv_open_device}: a context for the process {@code process} (whose memory it registers). */
    IbvContext open(AddressSpace process);

    /**
     * The network device behind Ethernet port {@code port}, as {@code rdma link show} finds it
     * (nldev's {@code ib_device_get_netdev}); null for a port without one (InfiniBand). EINVAL
     * for a port the device does not have, EIO once the device was removed.
     *
     * @since 0.14
     */
    default IbvNetdev netdev(int port) {
        return null;
    }

    /** True once the device was removed. */
    boolean removed();
}
