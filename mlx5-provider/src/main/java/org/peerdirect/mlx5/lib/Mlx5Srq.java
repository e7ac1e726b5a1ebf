package org.peerdirect.mlx5.lib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * libmlx5's SRQ ({@code struct mlx5_srq}, {@code mlx5_post_srq_recv}, {@code mlx5_free_srq_wqe}):
 * 2^n WQEs of {@code stride} bytes in the process's memory, each a next segment and data
 * segments, chained in a list the device consumes from {@link #head}; a completed WQE goes back
 * to the list's {@link #tail}. One slot always stays in the list (posting stops when head meets
 * tail), so the device never follows a link the library is rewriting. The doorbell record is the
 * count of WQEs posted.
 *
 * <p>Lock rules: {@link #lock} ({@code srq->lock}) guards head, tail, the counter and the wrid
 * array, for posters and for the poller freeing a WQE; it is taken by the CQ's poller while it
 * holds its CQ's lock (CQ lock, then SRQ lock; never the converse).
 */
public final class Mlx5Srq implements IbSrqOps {

    /** What the driver does beyond the data path ({@code ibv_cmd_modify_srq}, {@code ibv_cmd_query_srq}, {@code destroy_srq}). */
    public interface Control {
        void modify(IbvSrqAttr attr, int mask);

        IbvSrqAttr query();

        void destroy();
    }

    private static final ValueLayout.OfInt BE32 = CmdEntry.BE32;

    public final int srqn;
    private final UserBuf buf;
    private final int wqes;
    private final int stride;
    private final int maxSge;
    private final Control control;
    private final ReentrantLock lock = new ReentrantLock();
    private final long[] wrid;
    private int head;
    private int tail;
    private int counter;

    /**
     * @param wqes   a power of two
     * @param stride a power of two, at least 32 bytes
     */
    public Mlx5Srq(int srqn, UserBuf buf, int wqes, int stride, Control control) {
        this.srqn = srqn;
        this.buf = buf;
        this.wqes = wqes;
        this.stride = stride;
        this.maxSge = (stride - Srq.NEXT_SEG_SIZE) / Qp.DS_SIZE;
        this.control = control;
        this.wrid = new long[wqes];
        this.tail = wqes - 1;
    }

    /** The list the device starts from: WQE i links to i + 1, the last back to 0 (libmlx5's {@code mlx5_alloc_srq_buf}). */
    public static void initList(UserBuf buf, int wqes, int stride) {
        for (int i = 0; i < wqes; i++) {
            long off = (long) i * stride;
            buf.page(off).set(CmdEntry.BE16, (off & 4095) + Srq.NEXT_WQE_INDEX, (short) (i + 1 & wqes - 1));
        }
    }

    /** The geometry libmlx5 computes: {WQEs (max_wr + 1, a power of two), stride (a power of two ≥ 32)}. */
    public static int[] geometry(int maxWr, int maxSge) {
        int wqes = Integer.highestOneBit(Math.max(1, maxWr + 1) * 2 - 1);
        int stride = Math.max(32, Integer.highestOneBit((Srq.NEXT_SEG_SIZE + Qp.DS_SIZE * Math.max(1, maxSge)) * 2 - 1));
        return new int[] { wqes, stride };
    }

    @Override
    public void postSrqRecv(IbvRecvWr wr) {
        int posted = 0;
        lock.lock();
        try {
            for (IbvRecvWr w = wr; w != null; w = w.next) {
                if (w.numSge < 0 || w.numSge > maxSge || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, String.format("SRQ 0x%x: receive request %d has %d SGEs, max %d", srqn, w.wrId,
                            w.numSge, maxSge), w);
                }
                if (head == tail) {
                    throw new PostException(Errno.ENOMEM, String.format("SRQ 0x%x is full (%d requests)", srqn, wqes - 1), w);
                }
                long off = (long) head * stride;
                MemorySegment p = buf.page(off);
                Mlx5Qp.recvSegments(p, (off & 4095) + Srq.NEXT_SEG_SIZE, w, maxSge);
                wrid[head] = w.wrId;
                head = p.get(CmdEntry.BE16, (off & 4095) + Srq.NEXT_WQE_INDEX) & wqes - 1;
                posted++;
            }
        } finally {
            if (posted > 0) {
                counter += posted;
                VarHandle.releaseFence(); // the WQEs before the count that publishes them
                buf.dbr().set(BE32, Srq.DBR_COUNTER, counter);
            }
            lock.unlock();
        }
    }

    /** The poller saw the receive CQE of WQE {@code index}: its wr_id, and the WQE back at the list's tail. */
    long completed(int index) {
        lock.lock();
        try {
            int i = index & wqes - 1;
            long off = (long) tail * stride;
            buf.page(off).set(CmdEntry.BE16, (off & 4095) + Srq.NEXT_WQE_INDEX, (short) i);
            tail = i;
            return wrid[i];
        } finally {
            lock.unlock();
        }
    }

    /** {@code mlx5_modify_srq}: the kernel's ({@code ibv_cmd_modify_srq}). */
    @Override
    public void modifySrq(IbvSrqAttr attr, int mask) {
        control.modify(attr, mask);
    }

    /** {@code mlx5_query_srq}: the kernel's ({@code ibv_cmd_query_srq}). */
    @Override
    public IbvSrqAttr querySrq() {
        return control.query();
    }

    @Override
    public void destroySrq() {
        control.destroy();
    }

    /** {@code mlx5_get_srq_num}. */
    @Override
    public int srqNum() {
        return srqn;
    }

    @Override
    public String toString() {
        return String.format("mlx5 SRQ 0x%x (%d WQEs of %d bytes)", srqn, wqes, stride);
    }
}
