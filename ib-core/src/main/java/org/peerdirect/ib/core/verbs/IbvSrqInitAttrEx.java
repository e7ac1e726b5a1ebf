package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_srq_init_attr_ex}: the SRQ's type, PD, and for an XRC SRQ its domain and
 * completion queue ({@code IBV_SRQ_INIT_ATTR_TYPE | _PD | _XRCD | _CQ}), with the sizes of
 * {@code ibv_srq_attr}.
 *
 * @since 0.10
 */
public final class IbvSrqInitAttrEx {
    /** {@code enum ibv_srq_type} ({@code IBV_SRQT_BASIC} 0, {@code IBV_SRQT_XRC} 1). */
    public enum SrqType {
        BASIC, XRC
    }

    public SrqType srqType = SrqType.BASIC;
    public IbvPd pd;
    /** XRC: the domain whose receive QPs deliver into this SRQ. */
    public IbvXrcd xrcd;
    /** XRC: where its receives complete (a basic SRQ's receives complete to each QP's receive CQ). */
    public IbvCq cq;
    public int maxWr = 128;
    public int maxSge = 1;
}
