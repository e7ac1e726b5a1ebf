package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.mm.AddressSpace;

/** {@code struct ibv_context}: an open device in one process. */
@ProviderType
public interface IbvContext extends AutoCloseable {

    IbvDevice device();

    AddressSpace process();

    /** {@code ibv_query_device}. */
    IbvDeviceAttr queryDevice();

    /** {@code ibv_query_device_ex}: the same attributes; {@code odpCaps()} is the extended part. */
    IbvDeviceAttr queryDeviceEx();

    /** {@code ibv_query_port} (ports are numbered from 1). */
    IbvPortAttr queryPort(int port);

    /** {@code ibv_query_gid}: the GID as text, e.g. {@code fe80:0000:0000:0000:0002:c903:0000:0001}. */
    String queryGid(int port, int index);

    /** {@code ibv_alloc_pd}. */
    IbvPd allocPd();

    /** {@code ibv_create_comp_channel}. */
    IbvCompChannel createCompChannel();

    /** {@code ibv_create_cq}: at least {@code cqe} entries; events go to {@code channel} (may be null). */
    IbvCq createCq(int cqe, IbvCompChannel channel);

    /** {@code ibv_close_device}: destroys what is left of the context. */
    @Override
    void close();
}
