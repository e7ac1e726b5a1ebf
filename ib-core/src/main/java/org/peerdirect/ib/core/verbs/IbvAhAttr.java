package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_ah_attr}, mutable: where UD datagrams of an address handle go. On an
 * InfiniBand port the destination LID routes; with {@link #isGlobal} a GRH carries the
 * destination GID too. On an Ethernet (RoCE) port the GRH and its GID are the only address
 * ({@code rdma_check_ah_attr}: a RoCE AH without one is EINVAL).
 *
 * @since 0.8
 */
public final class IbvAhAttr {
    /** {@code dlid}: the destination LID (InfiniBand; ignored on RoCE). */
    public int dlid;
    /** {@code port_num}: the local port, 1-based. */
    public int portNum = 1;
    /** {@code is_global}: a GRH to {@link #dgid}. */
    public boolean isGlobal;
    /** {@code grh.dgid}: 16 bytes in network order ({@link IbvGid#parse}). */
    public byte[] dgid = new byte[16];
    /** {@code grh.sgid_index}: the source GID's index in the port's GID table. */
    public int sgidIndex;
    /** {@code grh.hop_limit}. */
    public int hopLimit = 64;

    /** An InfiniBand address: LID {@code dlid} through {@code portNum}, no GRH. */
    public static IbvAhAttr lid(int dlid, int portNum) {
        IbvAhAttr a = new IbvAhAttr();
        a.dlid = dlid;
        a.portNum = portNum;
        return a;
    }

    /** A global address: GID {@code dgid} (16 bytes) from source GID {@code sgidIndex} through {@code portNum}. */
    public static IbvAhAttr gid(byte[] dgid, int sgidIndex, int portNum) {
        IbvAhAttr a = new IbvAhAttr();
        a.isGlobal = true;
        a.dgid = dgid.clone();
        a.sgidIndex = sgidIndex;
        a.portNum = portNum;
        return a;
    }

    public IbvAhAttr copy() {
        IbvAhAttr a = new IbvAhAttr();
        a.dlid = dlid;
        a.portNum = portNum;
        a.isGlobal = isGlobal;
        a.dgid = dgid == null ? null : dgid.clone();
        a.sgidIndex = sgidIndex;
        a.hopLimit = hopLimit;
        return a;
    }
}
