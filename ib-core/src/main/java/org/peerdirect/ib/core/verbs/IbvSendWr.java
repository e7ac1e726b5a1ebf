package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_send_wr}, mutable and reusable. {@link #next} chains requests as in C; the
 * scatter list is {@code sgList[0..numSge)}. Fields by opcode: RDMA ({@link #remoteAddr},
 * {@link #rkey}), atomics (also {@link #compareAdd}, {@link #swap}), UD ({@link #ah},
 * {@link #remoteQpn}, {@link #remoteQkey}), {@link #immData} for the _WITH_IMM opcodes.
 */
public final class IbvSendWr {
    /** {@code IBV_SEND_FENCE}. */
    public static final int SEND_FENCE = 1;
    /** {@code IBV_SEND_SIGNALED}: generate a completion on success. */
    public static final int SEND_SIGNALED = 1 << 1;
    /** {@code IBV_SEND_SOLICITED}. */
    public static final int SEND_SOLICITED = 1 << 2;
    /** {@code IBV_SEND_INLINE}: the data is copied at post time; lkeys are not checked. */
    public static final int SEND_INLINE = 1 << 3;

    public long wrId;
    public IbvSendWr next;
    public IbvSge[] sgList = new IbvSge[0];
    public int numSge;
    public IbvWrOpcode opcode = IbvWrOpcode.SEND;
    public int sendFlags;
    public int immData;
    public long remoteAddr;
    public int rkey;
    /** Compare (CMP_AND_SWP), add (FETCH_AND_ADD), or the 8 bytes an ATOMIC_WRITE stores. */
    public long compareAdd;
    public long swap;
    public IbvAh ah;
    public int remoteQpn;
    public int remoteQkey;

    /** Sets a one-element scatter list. */
    public IbvSendWr sge(long addr, int length, int lkey) {
        if (sgList.length < 1) {
            sgList = new IbvSge[] {new IbvSge()};
        }
        sgList[0].set(addr, length, lkey);
        numSge = 1;
        return this;
    }

    /** Sum of the scatter list's lengths. */
    public long totalLength() {
        long t = 0;
        for (int i = 0; i < numSge; i++) {
            t += sgList[i].length & 0xFFFF_FFFFL;
        }
        return t;
    }
}
