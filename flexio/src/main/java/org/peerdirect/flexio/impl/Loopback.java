package org.peerdirect.flexio.impl;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxUar;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxUmem;

/**
 * The runtime's internal loopback RC QP (DPA_MODEL.md §2.5, [model]: NVIDIA's implementation of
 * {@code flexio_host2dev_memcpy} is not public; SNAP does the same): a DevX RC QP connected to
 * itself whose RDMA WRITEs carry a bounce buffer of the user's process into DPA memory through a
 * device mkey (and whose RDMA READs carry DPA memory back), and whose WRITE-with-immediate can trigger a DPA thread's CQ. Its rings, doorbell
 * records and bounce buffer live in one mapping of the user's process, pinned as a DevX umem; the
 * host rings its send queue through the process's DevX UAR and polls its CQ.
 *
 * <p>Not thread-safe: the owning {@code FlexioProcess} serialises its users (its lock).
 */
public final class Loopback implements AutoCloseable {

    static final int LOG_CQ = 6;
    static final int LOG_SQ = 4;
    static final int LOG_RQ = 2;
    static final int LOG_RQ_STRIDE = 2;
    static final long CQ_RING = 0;
    static final long WQ = 4096;
    static final long SQ = WQ + ((1L << LOG_RQ) << 4 + LOG_RQ_STRIDE);
    static final long DBR_PAGE = 2 * 4096;
    static final long CQ_DBR = DBR_PAGE;
    static final long QP_DBR = DBR_PAGE + 64;
    static final long BOUNCE = 3 * 4096;
    /** Bytes one WRITE carries. */
    public static final int BOUNCE_SIZE = 64 * 1024;
    static final long LENGTH = BOUNCE + BOUNCE_SIZE;

    private final AddressSpace proc;
    private final DevxUar uar;
    private final long va;
    private final DevxUmem umem;
    private final DevxObj cq;
    private final DevxObj qp;
    private final DevxObj bounceMkey;
    private final int qpn;
    private final int lkey;
    private final Duration timeout;
    private int sqPi;
    private int ci;
    /** Receive WQEs posted (the RQ doorbell record's counter); only a receive CQ given at creation takes any. */
    private int rqPi;

    /** Maps and pins its memory, creates CQ, QP and the bounce buffer's mkey on {@code pdn}, connects the QP to itself. */
    public Loopback(IbvContext ctx, int pdn, DevxUar uar, Duration timeout) {
        this(ctx, pdn, uar, timeout, -1);
    }

    /**
     * As the plain loopback, but the QP's receive queue completes on CQ {@code rcqn} (not its own),
     * and it keeps its receive queue posted: each {@link #writeImm} consumes a receive WQE there and
     * so a CQE on that CQ, which triggers the DPA thread the CQ is bound to (the RPC's trigger,
     * DPA_MODEL.md §2.5). {@code rcqn} -1: the loopback's own CQ, no receives posted.
     */
    public Loopback(IbvContext ctx, int pdn, DevxUar uar, Duration timeout, int rcqn) {
        this.proc = ctx.process();
        this.uar = uar;
        this.timeout = timeout;
        this.va = proc.mmap(LENGTH);
        DevxUmem um = null;
        DevxObj c = null;
        DevxObj q = null;
        try {
            proc.populate(va, LENGTH, true);
            byte[] invalid = {(byte) (Cq.CQE_INVALID << 4 | 1)};
            for (int i = 0; i < 1 << LOG_CQ; i++) {
                proc.write(va + CQ_RING + i * 64L + Cq.CQE_OP_OWN, invalid, 0, 1);
            }
            um = Mlx5dv.devxUmemReg(ctx, va, LENGTH, IbAccess.LOCAL_WRITE);
            c = Mlx5dv.devxObjCreate(ctx, Prm.createCq(LOG_CQ, uar.page(), Mlx5dv.devxQueryEqn(ctx, 0), false, um.umemId(),
                    CQ_RING, CQ_DBR), 16);
            int cqn = Prm.index(c);
            q = Mlx5dv.devxObjCreate(ctx, Prm.createRcQp(pdn, uar.page(), cqn, rcqn < 0 ? cqn : rcqn, LOG_SQ, LOG_RQ, LOG_RQ_STRIDE,
                    um.umemId(), WQ, QP_DBR), 16);
            this.qpn = Prm.index(q);
            this.bounceMkey = Mlx5dv.devxObjCreate(ctx, Prm.createUmemMkey(pdn, va + BOUNCE, BOUNCE_SIZE, um.umemId(), BOUNCE), 16);
            this.lkey = Prm.index(bounceMkey) << 8;
            Prm.connectRc(q, qpn, qpn, gid(ctx.queryGid(1, 0)), 0, 0);
            if (rcqn >= 0) {
                postReceives();
            }
        } catch (RuntimeException e) {
            if (q != null) {
                Mlx5dv.devxObjDestroy(q);
            }
            if (c != null) {
                Mlx5dv.devxObjDestroy(c);
            }
            if (um != null) {
                Mlx5dv.devxUmemDereg(um);
            }
            proc.munmap(va, LENGTH);
            throw e;
        }
        this.umem = um;
        this.cq = c;
        this.qp = q;
    }

    static byte[] gid(String text) {
        String hex = text.replace(":", "");
        byte[] g = new byte[16];
        for (int i = 0; i < 16; i++) {
            g[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return g;
    }

    /**
     * RDMA WRITEs {@code len} bytes of {@code src} (from {@code off}) to {@code raddr} of
     * {@code rkey}, through the bounce buffer a chunk at a time; returns when the last completed.
     *
     * @throws FlexioFailure naming the completion's syndrome, or the timeout
     */
    public void write(byte[] src, int off, int len, long raddr, int rkey) {
        for (int done = 0; done < len; ) {
            int n = Math.min(BOUNCE_SIZE, len - done);
            proc.write(va + BOUNCE, src, off + done, n);
            post(Wqe.OP_RDMA_WRITE, raddr + done, rkey, n, 0);
            poll("RDMA WRITE of " + n + " bytes to 0x" + Long.toHexString(raddr + done));
            done += n;
        }
    }

    /**
     * RDMA READs {@code len} bytes at {@code raddr} of {@code rkey} into {@code dst} (from
     * {@code off}), through the bounce buffer a chunk at a time; returns when the last completed.
     * DOCA DPA's {@code doca_dpa_d2h_memcpy} ([model], DPA_MODEL.md §2.5).
     *
     * @throws FlexioFailure naming the completion's syndrome, or the timeout
     */
    public void read(byte[] dst, int off, int len, long raddr, int rkey) {
        for (int done = 0; done < len; ) {
            int n = Math.min(BOUNCE_SIZE, len - done);
            post(Wqe.OP_RDMA_READ, raddr + done, rkey, n, 0);
            poll("RDMA READ of " + n + " bytes from 0x" + Long.toHexString(raddr + done));
            proc.read(va + BOUNCE, dst, off + done, n);
            done += n;
        }
    }

    /**
     * Posts an RDMA WRITE-with-immediate of {@code src} (1..{@link #BOUNCE_SIZE} bytes) to
     * {@code raddr} of {@code rkey} and returns at once: the responder consumes a receive WQE and
     * completes on the receive CQ given at creation, with {@code imm}. {@link #reapWriteImm} waits
     * for the send's completion and posts the receive WQE back; one may be outstanding at a time
     * (the bounce buffer holds its data).
     */
    public void postWriteImm(byte[] src, long raddr, int rkey, int imm) {
        if (src.length == 0 || src.length > BOUNCE_SIZE) {
            throw new IllegalArgumentException("a WRITE-with-immediate of 1.." + BOUNCE_SIZE + " bytes, not " + src.length);
        }
        proc.write(va + BOUNCE, src, 0, src.length);
        post(Wqe.OP_RDMA_WRITE_IMM, raddr, rkey, src.length, imm);
    }

    /**
     * Waits for the completion of the WRITE-with-immediate {@link #postWriteImm} posted and puts
     * back the receive WQE it took (the responder took it before the requester's completion).
     *
     * @throws FlexioFailure naming the completion's syndrome, or the timeout
     */
    public void reapWriteImm() {
        poll("RDMA WRITE-with-immediate");
        rqPi++;
        proc.write(va + QP_DBR + Qp.DBR_RCV, be32(rqPi & 0xffff), 0, 4);
    }

    /** Every receive WQE an empty scatter list (the WRITE-with-immediate's data goes to its raddr), the record counting them all. */
    private void postReceives() {
        int stride = 16 << LOG_RQ_STRIDE;
        ByteBuffer w = ByteBuffer.allocate(stride).order(ByteOrder.BIG_ENDIAN);
        w.putInt((int) Qp.DATA_LKEY, Qp.INVALID_LKEY);
        for (int i = 0; i < 1 << LOG_RQ; i++) {
            proc.write(va + WQ + (long) i * stride, w.array(), 0, stride);
        }
        rqPi = 1 << LOG_RQ;
        proc.write(va + QP_DBR + Qp.DBR_RCV, be32(rqPi & 0xffff), 0, 4);
    }

    private void post(int opcode, long raddr, int rkey, int len, int imm) {
        ByteBuffer w = ByteBuffer.allocate(64).order(ByteOrder.BIG_ENDIAN);
        w.putInt((int) Qp.CTRL_OPMOD_IDX_OPCODE, (sqPi & 0xffff) << 8 | opcode);
        w.putInt((int) Qp.CTRL_QPN_DS, qpn << 8 | 3);
        w.put((int) Qp.CTRL_FM_CE_SE, (byte) Qp.CTRL_CQ_UPDATE);
        w.putInt((int) Qp.CTRL_IMM, imm);
        w.putLong(16 + (int) Qp.RADDR_VA, raddr);
        w.putInt(16 + (int) Qp.RADDR_RKEY, rkey);
        w.putInt(32 + (int) Qp.DATA_BYTE_COUNT, len);
        w.putInt(32 + (int) Qp.DATA_LKEY, lkey);
        w.putLong(32 + (int) Qp.DATA_ADDR, va + BOUNCE);
        proc.write(va + SQ + (long) (sqPi & ((1 << LOG_SQ) - 1)) * Qp.SEND_WQE_BB, w.array(), 0, 64);
        sqPi++;
        proc.write(va + QP_DBR + Qp.DBR_SND, be32(sqPi & 0xffff), 0, 4);
        // the doorbell: the control segment's first 8 bytes to the BlueFlame register, in memory order
        Mlx5dv.devxUarWrite64(uar, Qp.UAR_BF_OFFSET, ByteBuffer.wrap(w.array(), 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong());
    }

    /** Waits for the next CQE (bounded); an error CQE or the timeout throws. */
    private void poll(String what) {
        long cqe = va + CQ_RING + (long) (ci & ((1 << LOG_CQ) - 1)) * Cq.CQE_SIZE;
        byte[] b = new byte[Cq.CQE_SIZE];
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            proc.read(cqe, b, 0, Cq.CQE_SIZE);
            int opOwn = b[(int) Cq.CQE_OP_OWN] & 0xff;
            if ((opOwn & 1) == ((ci >>> LOG_CQ) & 1) && opOwn >>> 4 != Cq.CQE_INVALID) {
                break;
            }
            if (System.nanoTime() > deadline) {
                throw new FlexioFailure(FlexioFailure.TIMEOUT, what + ": no completion within " + timeout.toMillis() + " ms");
            }
            Thread.onSpinWait();
            Thread.yield();
        }
        ci++;
        proc.write(va + CQ_DBR, be32(ci & 0xffffff), 0, 4);
        int op = (b[(int) Cq.CQE_OP_OWN] & 0xff) >>> 4;
        if (op != Cq.CQE_REQ) {
            throw new FlexioFailure(FlexioFailure.FAILED, String.format("%s completed with opcode 0x%x syndrome 0x%x vendor 0x%x",
                    what, op, b[(int) Cq.CQE_SYNDROME] & 0xff, b[(int) Cq.CQE_VENDOR_ERR_SYND] & 0xff));
        }
    }

    private static byte[] be32(int v) {
        return ByteBuffer.allocate(4).putInt(v).array();
    }

    public int qpn() {
        return qpn;
    }

    /** Destroys mkey, QP, CQ and umem, unmaps its memory; the QP is gone before the memory is. */
    @Override
    public void close() {
        Mlx5dv.devxObjDestroy(bounceMkey);
        Mlx5dv.devxObjDestroy(qp);
        Mlx5dv.devxObjDestroy(cq);
        Mlx5dv.devxUmemDereg(umem);
        proc.munmap(va, LENGTH);
    }
}
