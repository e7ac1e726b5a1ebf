package org.peerdirect.ib.core.verbs;

/** {@code struct ibv_qp_attr} with the {@code enum ibv_qp_attr_mask} bits. Mutable. */
public final class IbvQpAttr {
    public static final int STATE = 1;
    public static final int CUR_STATE = 1 << 1;
    public static final int EN_SQD_ASYNC_NOTIFY = 1 << 2;
    public static final int ACCESS_FLAGS = 1 << 3;
    public static final int PKEY_INDEX = 1 << 4;
    public static final int PORT = 1 << 5;
    public static final int QKEY = 1 << 6;
    public static final int AV = 1 << 7;
    public static final int PATH_MTU = 1 << 8;
    public static final int TIMEOUT = 1 << 9;
    public static final int RETRY_CNT = 1 << 10;
    public static final int RNR_RETRY = 1 << 11;
    public static final int RQ_PSN = 1 << 12;
    public static final int MAX_QP_RD_ATOMIC = 1 << 13;
    public static final int ALT_PATH = 1 << 14;
    public static final int MIN_RNR_TIMER = 1 << 15;
    public static final int SQ_PSN = 1 << 16;
    public static final int MAX_DEST_RD_ATOMIC = 1 << 17;
    public static final int PATH_MIG_STATE = 1 << 18;
    public static final int CAP = 1 << 19;
    public static final int DEST_QPN = 1 << 20;

    public IbvQpState qpState = IbvQpState.RESET;
    public int pathMtu = 5;
    public int qpAccessFlags;
    public int pkeyIndex;
    public int portNum = 1;
    public int qkey;
    /** Address vector ({@code ah_attr}): destination LID (InfiniBand). */
    public int dlid;
    /**
     * {@code ah_attr.is_global}: the path carries a GRH to {@link #dgid}. Required on an
     * Ethernet (RoCE) port, where the GID is the only address; optional on InfiniBand.
     */
    public boolean isGlobal;
    /** {@code ah_attr.grh.dgid}: the destination GID, 16 bytes in network order ({@link IbvGid#parse}). */
    public byte[] dgid = new byte[16];
    /** {@code ah_attr.grh.sgid_index}: the local GID table entry the packets leave from. */
    public int sgidIndex;
    /** {@code ah_attr.grh.hop_limit}. */
    public int hopLimit = 64;
    public int slid;
    public int destQpNum;
    public int rqPsn;
    public int sqPsn;
    public int maxRdAtomic = 1;
    public int maxDestRdAtomic = 1;
    /** Encoded RNR NAK timer (0 = 655.36 ms, 1 = 0.01 ms … 31 = 491.52 ms). */
    public int minRnrTimer = 12;
    /** Local ACK timeout: 4.096 µs × 2^timeout (0 = infinite). */
    public int timeout = 14;
    public int retryCnt = 7;
    /** 7 = retry forever. */
    public int rnrRetry = 7;

    public IbvQpAttr copy() {
        IbvQpAttr a = new IbvQpAttr();
        a.qpState = qpState;
        a.pathMtu = pathMtu;
        a.qpAccessFlags = qpAccessFlags;
        a.pkeyIndex = pkeyIndex;
        a.portNum = portNum;
        a.qkey = qkey;
        a.dlid = dlid;
        a.isGlobal = isGlobal;
        a.dgid = dgid.clone();
        a.sgidIndex = sgidIndex;
        a.hopLimit = hopLimit;
        a.slid = slid;
        a.destQpNum = destQpNum;
        a.rqPsn = rqPsn;
        a.sqPsn = sqPsn;
        a.maxRdAtomic = maxRdAtomic;
        a.maxDestRdAtomic = maxDestRdAtomic;
        a.minRnrTimer = minRnrTimer;
        a.timeout = timeout;
        a.retryCnt = retryCnt;
        a.rnrRetry = rnrRetry;
        return a;
    }
}
