package org.peerdirect.rdma;

import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;

/**
 * The RESET → INIT → RTR → RTS sequence of an RC queue pair, as {@code pp_connect_ctx} of
 * ibv_rc_pingpong and perftest perform it after exchanging LIDs and QP numbers. PSNs start at 0
 * and the path MTU is 4096 unless {@link #psn} and {@link #pathMtu} say otherwise; one outstanding
 * RDMA READ/atomic each way unless {@link #rdAtomic} says otherwise.
 *
 * <pre>{@code
 * new RcConnect().access(IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE).minRnrTimer(1)
 *         .connect(qp, peerLid, peerQpn);
 * }</pre>
 */
public final class RcConnect {

    private int port = 1;
    private int access;
    private int minRnrTimer = 12;
    private int rnrRetry = 7;
    private int timeout = 14;
    private int retryCnt = 7;
    private int rdAtomic = 1;
    private int rdAtomicOut = 1;
    private byte[] dgid;
    private int sgidIndex;
    private int pathMtu = 5;
    private int sqPsn;
    private int rqPsn;

    /** The local port (default 1). */
    public RcConnect port(int p) {
        port = p;
        return this;
    }

    /** The remote access the QP grants ({@code qp_access_flags}, IbAccess bits). */
    public RcConnect access(int a) {
        access = a;
        return this;
    }

    /** The encoded RNR NAK timer this QP asks its peer to wait (default 12 = 0.64 ms). */
    public RcConnect minRnrTimer(int t) {
        minRnrTimer = t;
        return this;
    }

    /** RNR retries (default 7 = forever). */
    public RcConnect rnrRetry(int r) {
        rnrRetry = r;
        return this;
    }

    /** Encoded local ACK timeout (default 14) and transport retries (default 7). */
    public RcConnect timeout(int t, int retries) {
        timeout = t;
        retryCnt = retries;
        return this;
    }

    /** Outstanding RDMA READ / atomic requests each way (default 1). */
    public RcConnect rdAtomic(int n) {
        rdAtomic = n;
        rdAtomicOut = n;
        return this;
    }

    /**
     * The RDMA READs / atomics this QP takes from its peer ({@code max_dest_rd_atomic}: what it
     * told the peer, perftest's own OUT_READS) and those it sends ({@code max_rd_atomic}: what the
     * peer told it), as perftest's {@code ctx_connect} sets them.
     *
     * @since 0.3
     */
    public RcConnect rdAtomic(int dest, int out) {
        rdAtomic = dest;
        rdAtomicOut = out;
        return this;
    }

    /**
     * Addresses the peer by its GID (a GRH on every packet, local GID index 0), as
     * {@code ibv_rc_pingpong -g 0} does: required on an Ethernet (RoCE) port. Null: by LID only.
     */
    public RcConnect gid(byte[] peerGid) {
        dgid = peerGid == null ? null : peerGid.clone();
        return this;
    }

    /**
     * Addresses the peer by its GID from local GID index {@code sgidIdx}, as
     * {@code ibv_rc_pingpong -g <sgidIdx>} does across hosts.
     *
     * @since 0.3
     */
    public RcConnect gid(byte[] peerGid, int sgidIdx) {
        gid(peerGid);
        sgidIndex = sgidIdx;
        return this;
    }

    /**
     * The path MTU as {@code enum ibv_mtu} (1 = 256 … 5 = 4096; default 5): ibv_rc_pingpong
     * {@code -m} (default 1024), perftest the smaller of both ports' active MTUs.
     *
     * @since 0.3
     */
    public RcConnect pathMtu(int ibvMtu) {
        if (ibvMtu < 1 || ibvMtu > 5) {
            throw new IllegalArgumentException("path MTU " + ibvMtu + ": an enum ibv_mtu is 1 (256) to 5 (4096)");
        }
        pathMtu = ibvMtu;
        return this;
    }

    /**
     * The first PSN this QP sends ({@code sq_psn}: its own, told to the peer) and the first it
     * expects ({@code rq_psn}: the peer's); default 0 both. The tools across hosts start from a
     * random PSN, as ibv_rc_pingpong and perftest ({@code lrand48() & 0xffffff}).
     *
     * @since 0.3
     */
    public RcConnect psn(int sq, int rq) {
        sqPsn = sq & 0xffffff;
        rqPsn = rq & 0xffffff;
        return this;
    }

    /** Moves {@code qp} from RESET to RTS, connected to QP {@code destQpn} behind LID {@code dlid}. */
    public void connect(IbvQp qp, int dlid, int destQpn) {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.INIT;
        x.pkeyIndex = 0;
        x.portNum = port;
        x.qpAccessFlags = access;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.ACCESS_FLAGS);
        x.qpState = IbvQpState.RTR;
        x.pathMtu = pathMtu;
        x.destQpNum = destQpn;
        x.rqPsn = rqPsn;
        x.maxDestRdAtomic = rdAtomic;
        x.minRnrTimer = minRnrTimer;
        x.dlid = dlid;
        if (dgid != null) {
            x.isGlobal = true;
            x.dgid = dgid;
            x.sgidIndex = sgidIndex;
            x.hopLimit = 1;
        }
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.AV | IbvQpAttr.PATH_MTU | IbvQpAttr.DEST_QPN | IbvQpAttr.RQ_PSN
                | IbvQpAttr.MAX_DEST_RD_ATOMIC | IbvQpAttr.MIN_RNR_TIMER);
        x.qpState = IbvQpState.RTS;
        x.timeout = timeout;
        x.retryCnt = retryCnt;
        x.rnrRetry = rnrRetry;
        x.sqPsn = sqPsn;
        x.maxRdAtomic = rdAtomicOut;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.TIMEOUT | IbvQpAttr.RETRY_CNT | IbvQpAttr.RNR_RETRY | IbvQpAttr.SQ_PSN
                | IbvQpAttr.MAX_QP_RD_ATOMIC);
    }

    /**
     * A UD QP from RESET to RTS on {@code portNum} with Q_Key {@code qkey}, as
     * {@code ibv_ud_pingpong}'s {@code pp_connect_ctx} does (INIT with P_Key index 0, port and
     * Q_Key; RTR; RTS with send PSN 0): a UD QP has no peer, its address handles name them.
     *
     * @since 0.2
     */
    public static void udToRts(IbvQp qp, int portNum, int qkey) {
        udToRts(qp, portNum, qkey, 0);
    }

    /**
     * {@link #udToRts(IbvQp, int, int)} with the send PSN {@code sqPsn}, the one ibv_ud_pingpong
     * tells its peer.
     *
     * @since 0.3
     */
    public static void udToRts(IbvQp qp, int portNum, int qkey, int sqPsn) {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.INIT;
        x.pkeyIndex = 0;
        x.portNum = portNum;
        x.qkey = qkey;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.QKEY);
        x.qpState = IbvQpState.RTR;
        qp.modify(x, IbvQpAttr.STATE);
        x.qpState = IbvQpState.RTS;
        x.sqPsn = sqPsn & 0xffffff;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.SQ_PSN);
    }
}
