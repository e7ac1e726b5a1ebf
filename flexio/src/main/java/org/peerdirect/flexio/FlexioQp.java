package org.peerdirect.flexio;

import java.util.Objects;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * {@code struct flexio_qp}: an RC QP (FlexIO supports RC only) on the process's PD and UAR whose
 * work queue and doorbell record live in the process heap (through the process DUMEM), so a DPA
 * handler posts its WQEs and rings {@code SXD_DB} through its outbox.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_qp_create, flexio_qp_modify</a>
 */
public final class FlexioQp extends FlexioObject {

    /**
     * {@code struct flexio_qp_attr} (RC): send and receive CQs, {@code 2^logSqDepth} send WQE
     * blocks after {@code 2^logRqDepth} receive WQEs of {@code 16 << logRqStride} bytes at
     * {@code wqDaddr}, the doorbell record at {@code dbrDaddr}; both in the heap.
     */
    public record Attr(FlexioCq sqCq, FlexioCq rqCq, int logSqDepth, int logRqDepth, int logRqStride, long wqDaddr, long dbrDaddr) {
        public Attr {
            Objects.requireNonNull(sqCq, "sq cq");
            Objects.requireNonNull(rqCq, "rq cq");
        }
    }

    private final int qpn;

    private FlexioQp(FlexioProcess p, DevxObj o) {
        super(p, o);
        this.qpn = Prm.index(o);
    }

    /** {@code flexio_qp_create}: FAILED names the refusal. */
    public static FlexioQp create(FlexioProcess p, Attr a) {
        return make(p, "flexio_qp_create", () -> {
            long base = p.processMemInfoGet().base();
            return new FlexioQp(p, Mlx5dv.devxObjCreate(p.ctx, Prm.createRcQp(p.pdn(), p.uar().page(), a.sqCq().cqNum(),
                    a.rqCq().cqNum(), a.logSqDepth(), a.logRqDepth(), a.logRqStride(), p.dumemId(), a.wqDaddr() - base,
                    a.dbrDaddr() - base), 16));
        });
    }

    /**
     * {@code flexio_qp_modify} from RESET to RTS towards {@code remoteQpn} at GID {@code rgid}
     * (RoCE v2; remote read, write and atomic enabled), the transitions FlexIO's samples make.
     */
    public void modifyToRts(int remoteQpn, byte[] rgid) {
        process.lock.lock();
        try {
            process.checkAlive();
            Prm.connectRc(obj, qpn, remoteQpn, rgid, 0, 0);
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_qp_modify of QP 0x" + Integer.toHexString(qpn), e);
        } finally {
            process.lock.unlock();
        }
    }

    /** The QP states {@link #modify} moves between and {@link #queryState} reports ({@code enum flexio_qp_state}). */
    public enum QpState {
        RST, INIT, RTR, RTS, SQD, SQE, ERR
    }

    /** {@code qp_access_mask} bits of {@link ModifyAttr}. */
    public static final int ACCESS_REMOTE_WRITE = 1, ACCESS_REMOTE_READ = 2, ACCESS_REMOTE_ATOMIC = 4;

    /**
     * {@code struct flexio_qp_attr} for one RC transition from {@code from} to {@code next}: every
     * QPC field it carries (the device takes the whole set each time, so a library that modifies
     * step by step passes all it has given so far). {@code pathMtu} in PRM units (1 = 256 bytes),
     * {@code rgid} the remote GID (16 bytes, used with {@code grh}), the PSNs 24 bits.
     */
    public record ModifyAttr(QpState from, QpState next, int vhcaPortNum, int pkeyIndex, int qpAccessMask, int pathMtu, int remoteQpNum,
            boolean grh, byte[] rgid, int gidTableIndex, int hopLimit, int rqPsn, int minRnrNakTimer, int logRraMax, int sqPsn,
            int retryCount, int rnrRetry, int ackTimeout, int logSraMax) {
        public ModifyAttr {
            Objects.requireNonNull(from, "from");
            Objects.requireNonNull(next, "next");
        }
    }

    /**
     * {@code flexio_qp_modify} with the attributes of {@code a}: one transition (RST→INIT,
     * INIT→INIT, INIT→RTR, RTR→RTS, RTS→RTS, any→ERR, any→RST; the device refuses one its state
     * machine does not have). FAILED names the refusal.
     */
    public void modify(ModifyAttr a) {
        int opcode = switch (a.next()) {
            case ERR -> Qp.QP_2ERR;
            case RST -> Qp.QP_2RST;
            case INIT -> a.from() == QpState.INIT ? Qp.INIT2INIT_QP : Qp.RST2INIT_QP;
            case RTR -> Qp.INIT2RTR_QP;
            case RTS -> a.from() == QpState.RTS ? Qp.RTS2RTS_QP : Qp.RTR2RTS_QP;
            default -> throw new FlexioException(FlexioStatus.FAILED, "flexio_qp_modify: no transition to " + a.next());
        };
        process.lock.lock();
        try {
            process.checkAlive();
            Prm.modifyRc(obj, opcode, qpn, c -> qpc(c, opcode, a));
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_qp_modify (" + a.from() + "->" + a.next() + ") of QP 0x" + Integer.toHexString(qpn), e);
        } finally {
            process.lock.unlock();
        }
    }

    private static void qpc(java.lang.foreign.MemorySegment c, int opcode, ModifyAttr a) {
        Qp.QPC_PRI_VHCA_PORT_NUM.set(c, 0, a.vhcaPortNum());
        Qp.QPC_PRI_PKEY_INDEX.set(c, 0, a.pkeyIndex());
        Qp.QPC_RWE.set(c, 0, (a.qpAccessMask() & ACCESS_REMOTE_WRITE) != 0 ? 1 : 0);
        Qp.QPC_RRE.set(c, 0, (a.qpAccessMask() & ACCESS_REMOTE_READ) != 0 ? 1 : 0);
        Qp.QPC_RAE.set(c, 0, (a.qpAccessMask() & ACCESS_REMOTE_ATOMIC) != 0 ? 1 : 0);
        if (opcode == Qp.INIT2RTR_QP) {
            Qp.QPC_MTU.set(c, 0, a.pathMtu());
            Qp.QPC_REMOTE_QPN.set(c, 0, a.remoteQpNum());
            Qp.QPC_NEXT_RCV_PSN.set(c, 0, a.rqPsn());
            Qp.QPC_MIN_RNR_NAK.set(c, 0, a.minRnrNakTimer());
            Qp.QPC_LOG_RRA_MAX.set(c, 0, a.logRraMax());
            Qp.QPC_PRI_GRH.set(c, 0, a.grh() ? 1 : 0);
            Qp.QPC_PRI_HOP_LIMIT.set(c, 0, a.hopLimit());
            Qp.QPC_PRI_SRC_ADDR_INDEX.set(c, 0, a.gidTableIndex());
            if (a.rgid() != null) {
                java.lang.foreign.MemorySegment.copy(java.lang.foreign.MemorySegment.ofArray(a.rgid()), 0, c, Qp.QPC_PRI_RGID, 16);
            }
        }
        if (opcode == Qp.RTR2RTS_QP) {
            Qp.QPC_NEXT_SEND_PSN.set(c, 0, a.sqPsn());
            Qp.QPC_RETRY_COUNT.set(c, 0, a.retryCount());
            Qp.QPC_RNR_RETRY.set(c, 0, a.rnrRetry());
            Qp.QPC_PRI_ACK_TIMEOUT.set(c, 0, a.ackTimeout());
            Qp.QPC_LOG_SRA_MAX.set(c, 0, a.logSraMax());
        }
    }

    /** {@code flexio_qp_query}'s state: {@code QUERY_QP}, the state as the device holds it (ERR after the device failed the QP). */
    public QpState queryState() {
        process.lock.lock();
        try {
            process.checkAlive();
            return switch (Qp.QPC_STATE.get(Prm.queryQp(obj, qpn), 0)) {
                case Qp.STATE_RST -> QpState.RST;
                case Qp.STATE_INIT -> QpState.INIT;
                case Qp.STATE_RTR -> QpState.RTR;
                case Qp.STATE_RTS -> QpState.RTS;
                case Qp.STATE_SQD -> QpState.SQD;
                case Qp.STATE_SQER -> QpState.SQE;
                default -> QpState.ERR;
            };
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("QUERY_QP of QP 0x" + Integer.toHexString(qpn), e);
        } finally {
            process.lock.unlock();
        }
    }

    /** A GID as {@code ibv_query_gid} prints it ({@code fe80:0000:...}) as the 16 bytes {@link #modifyToRts} takes. */
    public static byte[] gid(String text) {
        String hex = text.replace(":", "");
        if (hex.length() != 32) {
            throw new IllegalArgumentException("not a GID: " + text);
        }
        byte[] g = new byte[16];
        for (int i = 0; i < 16; i++) {
            g[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return g;
    }

    /**
     * {@code flexio_sq_create}: raw Ethernet send queues are not modelled (DPA_MODEL.md §6: the
     * engine has no Ethernet data plane); FlexIO's RC QP ({@link #create}) carries the same traffic.
     *
     * @throws FlexioException always, FAILED, saying so
     */
    public static FlexioQp sqCreate(FlexioProcess p) {
        throw new FlexioException(FlexioStatus.FAILED, "flexio_sq_create: raw Ethernet SQs are not modelled"
                + " (no Ethernet data plane, DPA_MODEL.md section 6); use an RC QP (flexio_qp_create)");
    }

    /** {@code flexio_rq_create}: as {@link #sqCreate}, not modelled. */
    public static FlexioQp rqCreate(FlexioProcess p) {
        throw new FlexioException(FlexioStatus.FAILED, "flexio_rq_create: raw Ethernet RQs are not modelled"
                + " (no Ethernet data plane, DPA_MODEL.md section 6); use an RC QP (flexio_qp_create)");
    }

    /** {@code flexio_qp_get_qp_num}. */
    public int qpNum() {
        return qpn;
    }

    @Override
    public String toString() {
        return "qp 0x" + Integer.toHexString(qpn) + " of " + process;
    }
}
