package org.peerdirect.hca.engine;

/**
 * The QP context a transition command carries ({@code struct mlx4_qp_context}, the fields this
 * model uses): port, path MTU, Q_Key, primary path (destination LID), remote QPN, PSNs, remote
 * access enable bits, RDMA-read/atomic depths, timers and retry counts. The driver keeps one per QP
 * and passes it whole with every transition; the hardware copies what it needs.
 */
public final class QpContext {
    /** Remote read / write / atomic enable ({@code MLX4_QP_BIT_RRE}, {@code _RWE}, {@code _RAE}). */
    public static final int BIT_RRE = 1 << 15;
    public static final int BIT_RWE = 1 << 14;
    public static final int BIT_RAE = 1 << 13;
    /**
     * Model-only: the responder accepts RDMA FLUSH with the global-visibility / persistence
     * placement type ({@code IB_ACCESS_FLUSH_GLOBAL} / {@code _PERSISTENT} in the QP's access
     * flags, rxe's {@code check_qp_attr_access}). Neither ConnectX generation defines such bits.
     */
    public static final int BIT_FLUSH_GLOBAL = 1 << 16;
    public static final int BIT_FLUSH_PERSISTENT = 1 << 17;

    public int port = 1;
    /** Path MTU code: 1 = 256 … 5 = 4096 bytes. */
    public int mtu = 5;
    public int pkeyIndex;
    public int qkey;
    public int dlid;
    /** The primary path's remote GID (RoCE: the peer's IPv4-mapped address; what a port on a wire sends to). */
    public final byte[] rgid = new byte[16];
    public int remoteQpn;
    public int rqPsn;
    public int sqPsn;
    /** {@link #BIT_RRE} | {@link #BIT_RWE} | {@link #BIT_RAE} | {@link #BIT_FLUSH_GLOBAL} | {@link #BIT_FLUSH_PERSISTENT}. */
    public int remoteAccess;
    /** Outstanding RDMA READ / atomic as requester (sra_max) and as responder (rra_max). */
    public int sraMax = 1;
    public int rraMax = 1;
    /** Encoded RNR NAK timer this QP asks its requesters to wait (0 = 655.36 ms, 1 = 0.01 ms … 31). */
    public int minRnrTimer;
    /** Local ACK timeout, 4.096 µs × 2^ackTimeout (0 = infinite). */
    public int ackTimeout;
    public int retryCount;
    /** 7 = retry forever. */
    public int rnrRetry;

    public QpContext copy() {
        QpContext c = new QpContext();
        c.copyFrom(this);
        return c;
    }

    /** Takes every field of {@code o}. */
    public void copyFrom(QpContext o) {
        port = o.port;
        mtu = o.mtu;
        pkeyIndex = o.pkeyIndex;
        qkey = o.qkey;
        dlid = o.dlid;
        System.arraycopy(o.rgid, 0, rgid, 0, 16);
        remoteQpn = o.remoteQpn;
        rqPsn = o.rqPsn;
        sqPsn = o.sqPsn;
        remoteAccess = o.remoteAccess;
        sraMax = o.sraMax;
        rraMax = o.rraMax;
        minRnrTimer = o.minRnrTimer;
        ackTimeout = o.ackTimeout;
        retryCount = o.retryCount;
        rnrRetry = o.rnrRetry;
    }

    /** The IB spec's RNR NAK timer table, in nanoseconds. */
    private static final long[] RNR_NS = {655_360_000L, 10_000L, 20_000L, 30_000L, 40_000L, 60_000L, 80_000L, 120_000L,
            160_000L, 240_000L, 320_000L, 480_000L, 640_000L, 960_000L, 1_280_000L, 1_920_000L, 2_560_000L, 3_840_000L,
            5_120_000L, 7_680_000L, 10_240_000L, 15_360_000L, 20_480_000L, 30_720_000L, 40_960_000L, 61_440_000L,
            81_920_000L, 122_880_000L, 163_840_000L, 245_760_000L, 327_680_000L, 491_520_000L};

    /** The RNR back-off for an encoded timer value. */
    static long rnrTimerNanos(int encoded) {
        return RNR_NS[encoded & 31];
    }

    /**
     * The local ACK timeout for an encoded value, 4.096 us x 2^timeout. The IBA's 0 ("wait for
     * ever") is taken as 14 (about 67 ms): the model's requester never waits for ever on a peer
     * that is gone.
     */
    static long ackTimeoutNanos(int encoded) {
        return 4096L << Math.min(encoded == 0 ? 14 : encoded, 31);
    }
}
