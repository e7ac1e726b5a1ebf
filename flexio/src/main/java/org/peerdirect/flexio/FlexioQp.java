package org.peerdirect.flexio;

import java.util.Objects;

import org.peerdirect.flexio.impl.Prm;
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
