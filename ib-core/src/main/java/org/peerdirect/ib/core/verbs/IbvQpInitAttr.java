package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_qp_init_attr} with its {@code ibv_qp_cap}, and the two fields of
 * {@code ibv_qp_init_attr_ex} that {@link IbvContext#createQpEx} reads ({@link #pd},
 * {@link #xrcd}).
 */
public final class IbvQpInitAttr {
    /** {@code ibv_create_qp_ex}: the PD (every type but {@link IbvQpType#XRC_RECV}). @since 0.10 */
    public IbvPd pd;
    /** {@code ibv_create_qp_ex} with {@code IBV_QP_INIT_ATTR_XRCD}: the domain of an {@link IbvQpType#XRC_RECV} QP. @since 0.10 */
    public IbvXrcd xrcd;
    public IbvCq sendCq;
    public IbvCq recvCq;
    public IbvSrq srq;
    public IbvQpType qpType = IbvQpType.RC;
    /** {@code sq_sig_all}: every send request completes, signaled or not. */
    public boolean sqSigAll;
    public int maxSendWr = 128;
    public int maxRecvWr = 128;
    public int maxSendSge = 1;
    public int maxRecvSge = 1;
    public int maxInlineData;
}
