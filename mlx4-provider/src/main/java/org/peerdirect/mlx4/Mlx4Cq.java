package org.peerdirect.mlx4;

import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.hca.engine.Wqe;
import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;

/**
 * {@code struct mlx4_cq} with libmlx4's {@code mlx4_poll_cq}: reads the CQEs the hardware wrote,
 * turns each into an {@code ibv_wc} (work-request id from the QP's wrid array by WQE index, status
 * from the syndrome), and writes the consumer index back. Lock rules: {@link #pollLock} (libmlx4's
 * {@code cq->lock}) serialises pollers and guards {@link #ci}.
 */
final class Mlx4Cq implements IbCqOps {

    final Mlx4Device dev;
    final HwCq hw;
    final IbCqEvents events;
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Guarded by pollLock; read unlocked by the doorbell (a stale value only delays nothing: the model arms by command). */
    private volatile long ci;
    /** The arm sequence number ({@code cq->arm_sn}), moved by each completion event. */
    private volatile int armSn;
    /** The QP of the last CQE (libmlx4's {@code cur_qp}); guarded by pollLock. */
    private Mlx4Qp cur;

    Mlx4Cq(Mlx4Device dev, HwCq hw, IbCqEvents events) {
        this.dev = dev;
        this.hw = hw;
        this.events = events;
    }

    @Override
    public int poll(int n, IbvWc[] wc) {
        pollLock.lock();
        try {
            if (hw.inError()) {
                return -1;
            }
            long pi = hw.producerIndex();
            int k = 0;
            int max = Math.min(n, wc.length);
            while (k < max && ci < pi) {
                toWc(hw.cqe(ci), wc[k]);
                ci++;
                k++;
            }
            if (k > 0) {
                hw.consumerIndex(ci);
            }
            return k;
        } finally {
            pollLock.unlock();
        }
    }

    private void toWc(Cqe c, IbvWc w) {
        Mlx4Qp qp = cur;
        if (qp == null || qp.qpn != c.qpn) {
            qp = dev.qpTable[c.qpn];
            cur = qp;
        }
        boolean error = c.opcode == Cqe.OPCODE_ERROR;
        int op = error ? c.errorOpcode : c.opcode;
        w.qpNum = c.qpn;
        w.status = error ? Mlx4Status.status(c.syndrome) : IbvWcStatus.SUCCESS;
        w.vendorErr = c.vendorSyndrome;
        w.byteLen = c.byteCnt;
        w.immData = c.imm;
        w.srcQp = c.srcQp;
        w.slid = c.slid;
        w.wcFlags = ((c.flags & Cqe.FLAG_GRH) != 0 ? IbvWc.WC_GRH : 0) | ((c.flags & Cqe.FLAG_IMM) != 0 ? IbvWc.WC_WITH_IMM : 0);
        if (c.isSend) {
            w.opcode = switch (op) {
                case Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM -> IbvWcOpcode.RDMA_WRITE;
                case Wqe.OP_RDMA_READ -> IbvWcOpcode.RDMA_READ;
                case Wqe.OP_ATOMIC_CS -> IbvWcOpcode.COMP_SWAP;
                case Wqe.OP_ATOMIC_FA -> IbvWcOpcode.FETCH_ADD;
                default -> IbvWcOpcode.SEND;
            };
            w.wrId = qp == null ? 0 : qp.sqWrid[(int) c.wqeIndex & qp.sqMask];
        } else {
            w.opcode = op == Cqe.RECV_RDMA_WRITE_IMM ? IbvWcOpcode.RECV_RDMA_WITH_IMM : IbvWcOpcode.RECV;
            w.wrId = qp == null ? 0 : qp.recvWrid(c.wqeIndex);
        }
    }

    /**
     * {@code mlx4_cq_arm}: the UAR's CQ doorbell, one 64-bit write of be32
     * {@code sn << 28 | cmd | cqn} and be32 consumer index.
     */
    @Override
    public void reqNotify(boolean solicitedOnly) {
        int cmd = solicitedOnly ? Uar.CQ_DB_REQ_NOT_SOL : Uar.CQ_DB_REQ_NOT;
        int word = (armSn & 3) << 28 | cmd | hw.cqn & 0xff_ffff;
        long ciNow = ci;
        dev.core.fn.write64(2, dev.uarPage() * (long) Uar.PAGE_SIZE + Uar.CQ_DOORBELL,
                Long.reverseBytes((long) word << 32 | ciNow & 0xff_ffffL));
    }

    /** {@code mlx4_cq_event}'s arm sequence: the next arm is a new request. */
    void eventSeen() {
        armSn++;
    }

    @Override
    public int cqe() {
        return hw.size();
    }

    @Override
    public void destroyCq() {
        dev.hw2sw(0, hw.cqn, Mlx4Cmd.HW2SW_CQ); // mlx4_cq_free; refused (EBUSY) while a QP uses it
        if (dev.cqTable[hw.cqn] == this) {
            dev.cqTable[hw.cqn] = null;
        }
        dev.cqns.free(hw.cqn);
    }
}
