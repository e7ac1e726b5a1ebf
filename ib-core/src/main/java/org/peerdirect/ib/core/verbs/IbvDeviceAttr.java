package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_device_attr} plus the extended part of {@code ibv_device_attr_ex} that this
 * stack fills: the ODP capabilities ({@code odp_caps}).
 */
public record IbvDeviceAttr(String fwVer, long nodeGuid, long sysImageGuid, long maxMrSize, long pageSizeCap,
        int vendorId, int vendorPartId, int hwVer, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq,
        int maxCqe, int maxMr, int maxPd, int maxQpRdAtom, int maxQpInitRdAtom, int atomicCap, int maxSrq,
        int maxSrqWr, int maxSrqSge, int maxInlineData, int physPortCnt, OdpCaps odpCaps) {

    /** {@code IBV_ODP_SUPPORT}. */
    public static final long ODP_SUPPORT = 1;
    /** {@code IBV_ODP_SUPPORT_IMPLICIT}. */
    public static final long ODP_SUPPORT_IMPLICIT = 1 << 1;
    /** {@code IBV_ATOMIC_HCA}. */
    public static final int ATOMIC_HCA = 1;

    /** {@code struct ibv_odp_caps}: general caps and per-transport {@code ibv_odp_transport_cap_bits}. */
    public record OdpCaps(long generalCaps, int rcOdpCaps, int ucOdpCaps, int udOdpCaps) {
        public static final OdpCaps NONE = new OdpCaps(0, 0, 0, 0);
    }
}
