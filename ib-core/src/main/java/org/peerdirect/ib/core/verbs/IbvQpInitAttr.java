package org.peerdirect.ib.core.verbs;

/** {@code struct ibv_qp_init_attr} with its {@code ibv_qp_cap}. */
public final class IbvQpInitAttr {
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
