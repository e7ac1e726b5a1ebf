package org.peerdirect.mlx4;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx3.ifc.CqContext;
import org.peerdirect.hca.cx3.ifc.Cqe;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.mlx4.core.Mtt;

/**
 * {@code struct mlx4_cq} with libmlx4's {@code mlx4_poll_cq}: a ring of 32-byte CQEs
 * ({@link Cqe}) in DMA pages the MTT names, every owner bit set at the start
 * ({@code mlx4_ib_alloc_cq_buf} + {@code init_cqe_buf}), and an 8-byte doorbell record
 * ({@code set_ci}, {@code arm}); the poll takes each CQE software owns ({@code get_sw_cqe}: the
 * owner byte read with acquire, the rest after it), turns it into an {@code ibv_wc} (work-request
 * id from the QP's wrid array by WQE index, status from the syndrome), and writes the consumer
 * index to the record ({@code mlx4_update_cons_index}).
 *
 * <p>An overrun: a completion that finds the ring full is not written; the device raises the CQ
 * error event (asynchronous, on the async EQ) and the QP goes to error. The hardware can only
 * overrun a ring the record shows full, so a poll that starts on a full ring asks the device
 * ({@code QUERY_CQ}'s status) and reports the error at once (-1) rather than after the event;
 * the event sets the same flag.
 *
 * <p>The ring and the record are held pages ({@link DmaCoherentPages#allocHeld}): a removal unmaps them
 * but the CQ keeps reading what the device wrote before it went (the flushes of its QPs), as
 * libmlx4 reads its own memory; {@link #destroyCq} frees them.
 *
 * <p>Lock rules: {@link #pollLock} (libmlx4's {@code cq->lock}) serialises pollers and guards
 * {@link #ci}; destroy frees the pages under it.
 */
final class Mlx4Cq implements IbCqOps {

    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    final Mlx4Device dev;
    final int cqn;
    /** CQEs in the ring (a power of two). */
    final int nent;
    final IbCqEvents events;
    private final List<DmaCoherentPages.Page> buf;
    /** The ring's pages as the CPU sees them (buf's, in ring order): a CQE is read in place, no slice per CQE. */
    private final MemorySegment[] ring;
    private final Mtt.Range mtt;
    /** The doorbell record's page ({@code mlx4_db_alloc} of one record). */
    private final DmaCoherentPages.Page db;
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Guarded by pollLock; read unlocked by the arm doorbell (a stale value only names an older index). */
    private volatile long ci;
    /** The arm sequence number ({@code cq->arm_sn}), moved by each completion event. */
    private volatile int armSn;
    /** The CQ overran (the CQ error event, or QUERY_CQ at a poll on a full ring). */
    private volatile boolean error;
    /** The QP of the last CQE (libmlx4's {@code cur_qp}); guarded by pollLock. */
    private Mlx4IbQp cur;

    private Mlx4Cq(Mlx4Device dev, int cqn, int nent, IbCqEvents events, List<DmaCoherentPages.Page> buf, Mtt.Range mtt, DmaCoherentPages.Page db) {
        this.dev = dev;
        this.cqn = cqn;
        this.nent = nent;
        this.events = events;
        this.buf = buf;
        this.ring = buf.stream().map(DmaCoherentPages.Page::mem).toArray(MemorySegment[]::new);
        this.mtt = mtt;
        this.db = db;
    }

    /**
     * {@code mlx4_ib_create_cq} + {@code mlx4_cq_alloc}: the ring (2^{@code log} CQEs, owner bits
     * set) and its MTT, the doorbell record, the context (size, UAR, completion EQ, MTT address,
     * record address) to the device by {@code SW2HW_CQ} at {@code cqn}. On failure everything
     * allocated is given back.
     */
    static Mlx4Cq create(Mlx4Device dev, int cqn, int log, IbCqEvents events) {
        int npages = (int) Math.max(1, ((long) Cqe.SIZE << log) / 4096);
        List<DmaCoherentPages.Page> buf = new ArrayList<>(npages);
        Mtt.Range mtt = null;
        DmaCoherentPages.Page db = null;
        DmaCoherentPages.Page box = null;
        try {
            long[] iova = new long[npages];
            for (int i = 0; i < npages; i++) {
                DmaCoherentPages.Page p = dev.core.dma.allocHeld();
                buf.add(p);
                iova[i] = p.iova();
                for (long off = Cqe.OWNER_SR_OPCODE; off < 4096; off += Cqe.SIZE) {
                    p.mem().set(U8, off, (byte) Cqe.OWNER_MASK);
                }
            }
            mtt = dev.core.mtt.alloc(npages);
            dev.core.mtt.write(mtt, 0, iova);
            db = dev.core.dma.allocHeld();
            box = dev.core.dma.alloc();
            MemorySegment c = box.mem();
            c.set(BE32, CqContext.LOGSIZE_USRPAGE, log << 24 | dev.uarPage());
            c.set(U8, CqContext.COMP_EQN, (byte) dev.core.compEqn());
            c.set(U8, CqContext.LOG_PAGE_SIZE, (byte) 0);
            c.set(U8, CqContext.MTT_BASE_ADDR_H, (byte) (mtt.addr() >>> 32));
            c.set(BE32, CqContext.MTT_BASE_ADDR_L, (int) mtt.addr());
            c.set(BE64, CqContext.DB_REC_ADDR, db.iova());
            VarHandle.releaseFence(); // the ring's owner bits before the device may write it
            dev.core.cmd.box(box.iova(), 0, cqn, 0, Mlx4Cmd.SW2HW_CQ);
            return new Mlx4Cq(dev, cqn, 1 << log, events, buf, mtt, db);
        } catch (RuntimeException e) {
            dev.core.mtt.free(mtt);
            buf.forEach(dev.core.dma::free);
            dev.core.dma.free(db);
            throw e;
        } finally {
            dev.core.dma.free(box);
        }
    }

    /** The page holding CQE {@code i} ({@code get_cqe}); {@link #at} is its offset there. */
    private MemorySegment page(long i) {
        return ring[(int) ((i & nent - 1) * Cqe.SIZE >>> 12)];
    }

    private long at(long i) {
        return (i & nent - 1) * Cqe.SIZE & 4095;
    }

    /** Whether software owns CQE {@code i}: its owner bit is the bit of {@code i}'s pass ({@code get_sw_cqe}); acquire on the owner byte. */
    private boolean softwareOwns(long i) {
        boolean owner = ((byte) BYTE.getAcquire(page(i), at(i) + Cqe.OWNER_SR_OPCODE) & Cqe.OWNER_MASK) != 0;
        return owner == ((i & nent) != 0);
    }

    @Override
    public int poll(int n, IbvWc[] wc) {
        pollLock.lock();
        try {
            int max = Math.min(n, wc.length);
            if (error || max > 0 && ringFull() && overflowed()) {
                return -1;
            }
            int k = 0;
            while (k < max) {
                if (!softwareOwns(ci)) {
                    break;
                }
                toWc(page(ci), at(ci), wc[k]);
                ci++;
                k++;
            }
            if (k > 0) {
                VarHandle.releaseFence(); // the CQEs are read before the device may reuse their slots
                db.mem().set(BE32, Cqe.DB_SET_CI, (int) ci & 0xff_ffff);
            }
            return k;
        } finally {
            pollLock.unlock();
        }
    }

    /**
     * {@code mlx4_cq_clean} (libmlx4, at a QP's move to RESET): the CQEs of QP {@code qpn} still
     * in the ring go, each receive one of an SRQ giving its WQE back ({@code mlx4_free_srq_wqe});
     * the others move up over them, keeping the owner bit of the slot they land in, and the
     * consumer index passes the freed slots. Without it a CQE the device wrote before the reset
     * would be polled after it and named by the reset QP's new work-request ids.
     */
    void clean(int qpn, Mlx4IbSrq srq) {
        pollLock.lock();
        try {
            long prod = ci;
            while (softwareOwns(prod) && prod != ci + nent) {
                prod++;
            }
            int freed = 0;
            while (--prod - ci >= 0) {
                MemorySegment p = page(prod);
                long o = at(prod);
                int own = p.get(U8, o + Cqe.OWNER_SR_OPCODE);
                if ((p.get(BE32, o + Cqe.VLAN_MY_QPN) & Cqe.QPN_MASK) == qpn) {
                    if (srq != null && (own & Cqe.IS_SEND_MASK) == 0) {
                        srq.lib.completed(p.get(BE16, o + Cqe.WQE_INDEX) & 0xffff);
                    }
                    freed++;
                } else if (freed > 0) {
                    MemorySegment d = page(prod + freed);
                    long dOff = at(prod + freed);
                    int ownerBit = d.get(U8, dOff + Cqe.OWNER_SR_OPCODE) & Cqe.OWNER_MASK;
                    MemorySegment.copy(p, o, d, dOff, Cqe.SIZE);
                    d.set(U8, dOff + Cqe.OWNER_SR_OPCODE, (byte) (ownerBit | own & ~Cqe.OWNER_MASK));
                }
            }
            if (freed > 0) {
                ci += freed;
                VarHandle.releaseFence(); // the moved CQEs before the record frees their old slots
                db.mem().set(BE32, Cqe.DB_SET_CI, (int) ci & 0xff_ffff);
            }
        } finally {
            pollLock.unlock();
        }
    }

    /** Under pollLock: every slot holds a CQE not yet consumed (the last one before the consumer's is software's). */
    private boolean ringFull() {
        assert pollLock.isHeldByCurrentThread();
        return softwareOwns(ci + nent - 1);
    }

    /** {@code QUERY_CQ}: whether the device found the full ring with a completion to write (the CQ's overflow status). */
    private boolean overflowed() {
        if (!dev.core.loaded()) {
            return false; // a removed device wrote what it wrote: the ring is read to its end
        }
        DmaCoherentPages.Page box = null;
        try {
            box = dev.core.dma.alloc();
            dev.core.cmd.box(0, box.iova(), cqn, 0, Mlx4Cmd.QUERY_CQ);
            int status = box.mem().get(BE32, CqContext.FLAGS) >>> CqContext.STATUS_SHIFT;
            error = status == CqContext.STATUS_OVERFLOW;
            return error;
        } catch (RuntimeException gone) {
            return false; // the device went under the poll: nothing more will be written
        } finally {
            dev.core.dma.free(box);
        }
    }

    /** {@code mlx4_poll_one}'s translation of the CQE at {@code e + o}. */
    private void toWc(MemorySegment e, long o, IbvWc w) {
        int qpn = e.get(BE32, o + Cqe.VLAN_MY_QPN) & Cqe.QPN_MASK;
        Mlx4IbQp qp = cur;
        if (qp == null || qp.qpn != qpn) {
            qp = dev.qpTable[qpn];
            cur = qp;
        }
        int own = e.get(U8, o + Cqe.OWNER_SR_OPCODE);
        boolean isSend = (own & Cqe.IS_SEND_MASK) != 0;
        int op = own & Cqe.OPCODE_MASK;
        int wqeIndex = e.get(BE16, o + Cqe.WQE_INDEX) & 0xffff;
        w.qpNum = qpn;
        w.wrId = qp == null ? 0 : isSend ? qp.lib.sendCompleted(wqeIndex) : qp.recvWrid(wqeIndex);
        if (op == Cqe.OPCODE_ERROR) {
            if (qp != null) {
                qp.sawError();
            }
            // mlx4_handle_error_cqe: an ibv_wc's other fields are undefined with an error status
            w.status = Mlx4Status.status(e.get(U8, o + Cqe.SYNDROME) & 0xff);
            w.vendorErr = e.get(U8, o + Cqe.VENDOR_ERR_SYNDROME) & 0xff;
            w.opcode = isSend ? IbvWcOpcode.SEND : IbvWcOpcode.RECV;
            w.byteLen = 0;
            w.immData = 0;
            w.srcQp = 0;
            w.slid = 0;
            w.wcFlags = 0;
            return;
        }
        w.status = IbvWcStatus.SUCCESS;
        w.vendorErr = 0;
        w.byteLen = e.get(BE32, o + Cqe.BYTE_CNT);
        if (isSend) {
            w.opcode = switch (op) {
                case Cqe.SEND_RDMA_WRITE, Cqe.SEND_RDMA_WRITE_IMM -> IbvWcOpcode.RDMA_WRITE;
                case Cqe.SEND_RDMA_READ -> IbvWcOpcode.RDMA_READ;
                case Cqe.SEND_ATOMIC_CS -> IbvWcOpcode.COMP_SWAP;
                case Cqe.SEND_ATOMIC_FA -> IbvWcOpcode.FETCH_ADD;
                default -> IbvWcOpcode.SEND;
            };
            w.immData = 0;
            w.srcQp = 0;
            w.slid = 0;
            w.wcFlags = 0;
            return;
        }
        boolean imm = op == Cqe.RECV_RDMA_WRITE_IMM || op == Cqe.RECV_SEND_IMM;
        int g = e.get(BE32, o + Cqe.G_MLPATH_RQPN);
        w.opcode = op == Cqe.RECV_RDMA_WRITE_IMM ? IbvWcOpcode.RECV_RDMA_WITH_IMM : IbvWcOpcode.RECV;
        w.immData = imm ? e.get(BE32, o + Cqe.IMMED_RSS_INVALID) : 0;
        w.srcQp = g & Cqe.QPN_MASK;
        w.slid = e.get(BE16, o + Cqe.RLID) & 0xffff;
        w.wcFlags = ((g & Cqe.G_BIT) != 0 ? IbvWc.WC_GRH : 0) | (imm ? IbvWc.WC_WITH_IMM : 0);
    }

    /**
     * {@code mlx4_cq_arm}: the UAR's CQ doorbell, one 64-bit write of be32
     * {@code sn << 28 | cmd | cqn} and be32 consumer index.
     */
    @Override
    public void reqNotify(boolean solicitedOnly) {
        int cmd = solicitedOnly ? Uar.CQ_DB_REQ_NOT_SOL : Uar.CQ_DB_REQ_NOT;
        int word = (armSn & 3) << 28 | cmd | cqn & 0xff_ffff;
        long ciNow = ci;
        dev.core.fn.write64(2, dev.uarPage() * (long) Uar.PAGE_SIZE + Uar.CQ_DOORBELL,
                Long.reverseBytes((long) word << 32 | ciNow & 0xff_ffffL));
    }

    /** {@code mlx4_cq_event}'s arm sequence: the next arm is a new request. */
    void eventSeen() {
        armSn++;
    }

    /** The CQ error event of an overrun ({@code mlx4_cq_event} with {@code MLX4_EVENT_TYPE_CQ_ERROR}). */
    void overrun() {
        error = true;
    }

    @Override
    public int cqe() {
        return nent;
    }

    /**
     * {@code mlx4_ib_destroy_cq}: {@code HW2SW_CQ} (refused, EBUSY, while a QP uses it: the CQ
     * stays), then the MTT, the ring and the record go.
     */
    @Override
    public void destroyCq() {
        dev.hw2sw(0, cqn, Mlx4Cmd.HW2SW_CQ);
        if (dev.cqTable[cqn] == this) {
            dev.cqTable[cqn] = null;
        }
        dev.cqns.free(cqn);
        error = true; // a poll after this finds nothing to read
        pollLock.lock();
        try {
            if (dev.core.loaded()) {
                dev.core.mtt.free(mtt); // after an unload the MTT's ICM went with it
            }
            buf.forEach(dev.core.dma::free);
            dev.core.dma.free(db);
        } finally {
            pollLock.unlock();
        }
    }

    /** The ring's bytes for CQE {@code i}, a copy (the tools' and tests' view of what the device wrote). */
    MemorySegment cqeBytes(long i) {
        return MemorySegment.ofArray(page(i).asSlice(at(i), Cqe.SIZE).toArray(ValueLayout.JAVA_BYTE));
    }

    /** The doorbell record's {@code set_ci} as the device reads it. */
    int setCiRecord() {
        return db.mem().get(BE32, Cqe.DB_SET_CI);
    }
}
