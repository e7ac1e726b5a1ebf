package org.peerdirect.hca.engine;

/**
 * One receive WQE slot (a QP's receive queue or an SRQ): data segments only. The completion of a
 * receive reports the slot's WQE index; the driver keeps the work-request ids (as libmlx4's
 * {@code wrid} arrays).
 */
public final class RecvWqe {
    public int numSge;
    public final long[] addr;
    public final int[] byteCount;
    public final int[] lkey;

    RecvWqe(int maxSge) {
        addr = new long[Math.max(1, maxSge)];
        byteCount = new int[Math.max(1, maxSge)];
        lkey = new int[Math.max(1, maxSge)];
    }

    void copyFrom(RecvWqe o) {
        numSge = o.numSge;
        for (int i = 0; i < o.numSge; i++) {
            addr[i] = o.addr[i];
            byteCount[i] = o.byteCount[i];
            lkey[i] = o.lkey[i];
        }
    }
}
