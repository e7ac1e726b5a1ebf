package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_send_wr}, mutable and reusable. {@link #next} chains requests as in C; the
 * scatter list is {@code sgList[0..numSge)}. Fields by opcode: RDMA ({@link #remoteAddr},
 * {@link #rkey}), atomics (also {@link #compareAdd}, {@link #swap}), UD ({@link #ah},
 * {@link #remoteQpn}, {@link #remoteQkey}), {@link #immData} for the _WITH_IMM opcodes, FLUSH
 * ({@link #remoteAddr}, {@link #rkey}, {@link #flushLength}, {@link #flushType},
 * {@link #flushLevel}).
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
    /** {@code IBV_FLUSH_GLOBAL}: placement type, global visibility. @since 0.8 */
    public static final int FLUSH_GLOBAL = 1;
    /** {@code IBV_FLUSH_PERSISTENT}: placement type, persistence. @since 0.8 */
    public static final int FLUSH_PERSISTENT = 1 << 1;
    /** {@code IBV_FLUSH_RANGE}: selectivity level, the range given. @since 0.8 */
    public static final int FLUSH_RANGE = 0;
    /** {@code IBV_FLUSH_MR}: selectivity level, the whole MR of the rkey (the range is not checked). @since 0.8 */
    public static final int FLUSH_MR = 1;

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
    /** FLUSH: the bytes from {@link #remoteAddr} (level {@link #FLUSH_RANGE}; at most 2^31). @since 0.8 */
    public long flushLength;
    /** FLUSH: the placement type, {@link #FLUSH_GLOBAL} and/or {@link #FLUSH_PERSISTENT}. @since 0.8 */
    public int flushType;
    /** FLUSH: the selectivity level, {@link #FLUSH_RANGE} or {@link #FLUSH_MR}. @since 0.8 */
    public int flushLevel;
    public IbvAh ah;
    public int remoteQpn;
    public int remoteQkey;
    /**
     * XRC send QPs ({@link IbvQpType#XRC_SEND}): the number of the XRC SRQ at the target that
     * receives this request ({@code wr.qp_type.xrc.remote_srqn}, the XRCETH), read from
     * {@link IbvSrq#srqNum()} on the receiving side. @since 0.10
     */
    public int remoteSrqn;

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
