package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_device_attr} plus the extended part of {@code ibv_device_attr_ex} that this
 * stack fills: the ODP capabilities ({@code odp_caps}) and {@code device_cap_flags_ex} (the low 32
 * bits are {@code device_cap_flags}).
 */
public record IbvDeviceAttr(String fwVer, long nodeGuid, long sysImageGuid, long maxMrSize, long pageSizeCap,
        int vendorId, int vendorPartId, int hwVer, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq,
        int maxCqe, int maxMr, int maxPd, int maxQpRdAtom, int maxQpInitRdAtom, int atomicCap, int maxSrq,
        int maxSrqWr, int maxSrqSge, int maxInlineData, int physPortCnt, OdpCaps odpCaps, long deviceCapFlagsEx) {

    /**
     * {@code IB_UVERBS_DEVICE_ATOMIC_WRITE} in {@code device_cap_flags_ex} (bit 40): the device
     * executes {@link IbvWrOpcode#ATOMIC_WRITE}.
     *
     * @since 0.7
     */
    public static final long DEVICE_ATOMIC_WRITE = 1L << 40;
    /**
     * {@code IBV_DEVICE_XRC} in {@code device_cap_flags} (bit 20): the device carries XRC (XRC
     * domains, XRC SRQs, XRC send and receive QPs). @since 0.10
     */
    public static final long DEVICE_XRC = 1L << 20;
    /**
     * {@code IB_UVERBS_DEVICE_FLUSH_GLOBAL} (bit 38): the device executes {@link IbvWrOpcode#FLUSH}
     * with the global-visibility placement type, and MRs and QPs may carry
     * {@code IB_ACCESS_FLUSH_GLOBAL}.
     *
     * @since 0.8
     */
    public static final long DEVICE_FLUSH_GLOBAL = 1L << 38;
    /** {@code IB_UVERBS_DEVICE_FLUSH_PERSISTENT} (bit 39): the same for the persistence placement type. @since 0.8 */
    public static final long DEVICE_FLUSH_PERSISTENT = 1L << 39;

    /** The attributes of a device reporting no extended capability flag. */
    public IbvDeviceAttr(String fwVer, long nodeGuid, long sysImageGuid, long maxMrSize, long pageSizeCap, int vendorId,
            int vendorPartId, int hwVer, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge, int maxCq, int maxCqe, int maxMr,
            int maxPd, int maxQpRdAtom, int maxQpInitRdAtom, int atomicCap, int maxSrq, int maxSrqWr, int maxSrqSge,
            int maxInlineData, int physPortCnt, OdpCaps odpCaps) {
        this(fwVer, nodeGuid, sysImageGuid, maxMrSize, pageSizeCap, vendorId, vendorPartId, hwVer, maxQp, maxQpWr, deviceCapFlags,
                maxSge, maxCq, maxCqe, maxMr, maxPd, maxQpRdAtom, maxQpInitRdAtom, atomicCap, maxSrq, maxSrqWr, maxSrqSge,
                maxInlineData, physPortCnt, odpCaps, deviceCapFlags & 0xffff_ffffL);
    }

    /** {@code IBV_ODP_SUPPORT}. */
    public static final long ODP_SUPPORT = 1;
    /** {@code IBV_ODP_SUPPORT_IMPLICIT}. */
    public static final long ODP_SUPPORT_IMPLICIT = 1 << 1;
    /** {@code IBV_ATOMIC_HCA}. */
    public static final int ATOMIC_HCA = 1;

    /**
     * {@code struct ibv_odp_caps} (general caps and per-transport {@code ibv_odp_transport_cap_bits})
     * with {@code ibv_device_attr_ex.xrc_odp_caps}, and the largest ODP MR the driver takes
     * ({@code odp_max_size} of the kernel's {@code ib_odp_caps}; -1: unbounded, U64_MAX).
     */
    public record OdpCaps(long generalCaps, int rcOdpCaps, int ucOdpCaps, int udOdpCaps, int xrcOdpCaps, long maxOdpSize) {
        public static final OdpCaps NONE = new OdpCaps(0, 0, 0, 0, 0, 0);

        /** {@code IBV_ODP_SUPPORT_SEND} ... {@code IBV_ODP_SUPPORT_ATOMIC_WRITE}: the per-transport bits. */
        public static final int SUPPORT_SEND = 1;
        public static final int SUPPORT_RECV = 1 << 1;
        public static final int SUPPORT_WRITE = 1 << 2;
        public static final int SUPPORT_READ = 1 << 3;
        public static final int SUPPORT_ATOMIC = 1 << 4;
        public static final int SUPPORT_SRQ_RECV = 1 << 5;
        public static final int SUPPORT_FLUSH = 1 << 6;
        public static final int SUPPORT_ATOMIC_WRITE = 1 << 7;
    }
}
