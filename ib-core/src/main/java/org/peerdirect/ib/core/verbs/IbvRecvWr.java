package org.peerdirect.ib.core.verbs;

/** {@code struct ibv_recv_wr}, mutable and reusable. */
public final class IbvRecvWr {
    public long wrId;
    public IbvRecvWr next;
    public IbvSge[] sgList = new IbvSge[0];
    public int numSge;

    public IbvRecvWr sge(long addr, int length, int lkey) {
        if (sgList.length < 1) {
            sgList = new IbvSge[] {new IbvSge()};
        }
        sgList[0].set(addr, length, lkey);
        numSge = 1;
        return this;
    }
}
