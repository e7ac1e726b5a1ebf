package org.peerdirect.mlx4.lib;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * libmlx4's SRQ ({@code struct mlx4_srq}, {@code providers/mlx4/srq.c}): WQEs of one stride in the
 * process's buffer, each a next segment ({@code next_wqe_index}) and data segments, linked into a
 * free list from {@link #head} to {@link #tail} ({@code mlx4_alloc_srq_buf}; the tail WQE is kept
 * back, so 2^n WQEs take 2^n - 1 requests). A post takes the head and follows its link; the 16-bit
 * counter of posted WQEs goes to the doorbell record; a completion puts its WQE back at the tail
 * ({@code mlx4_free_srq_wqe}).
 *
 * <p>Lock rules: {@link #lock} (libmlx4's {@code srq->lock}) guards the list, the wrids and the
 * counter; taken by posters and by the pollers of the QPs' CQs.
 */
public final class Mlx4Srq {

    public final Mlx4Buf buf;
    /** WQEs in the buffer (a power of two) and their stride's log2. */
    public final int wqes;
    public final int shift;
    private final int maxGs;
    private final long[] wrid;
    private final ReentrantLock lock = new ReentrantLock();
    private int head;
    private int tail;
    private int counter;
    private final String who;

    /** Lays out the free list over {@code buf}: WQE i links to i + 1, every scatter entry an {@code INVALID_LKEY}. */
    public Mlx4Srq(Mlx4Buf buf, int wqes, int shift, int maxGs, String who) {
        this.buf = buf;
        this.wqes = wqes;
        this.shift = shift;
        this.maxGs = maxGs;
        this.who = who;
        this.wrid = new long[wqes];
        for (int i = 0; i < wqes; i++) {
            long off = (long) i << shift;
            MemorySegment p = buf.page(off);
            long o = off & 4095;
            p.set(BE16, o + Wqe.SRQ_NEXT_WQE_INDEX, (short) (i + 1 & wqes - 1));
            for (long s = Wqe.SRQ_NEXT_SIZE; s < 1L << shift; s += Wqe.DATA_SIZE) {
                p.set(BE32, o + s + Wqe.DATA_LKEY, Wqe.INVALID_LKEY);
            }
        }
        head = 0;
        tail = wqes - 1;
    }

    /**
     * {@code mlx4_srq_wqe_shift}: the stride of a next segment and {@code maxGs} data segments, a
     * power of two (log2).
     */
    public static int shift(int maxGs) {
        return 32 - Integer.numberOfLeadingZeros(Wqe.SRQ_NEXT_SIZE + maxGs * Wqe.DATA_SIZE - 1);
    }

    /** {@code mlx4_post_srq_recv}: each request into the head WQE; the counter to the doorbell record after the chain. */
    public void post(IbvRecvWr wr) {
        int posted = 0;
        lock.lock();
        try {
            for (IbvRecvWr w = wr; w != null; w = w.next) {
                if (w.numSge < 0 || w.numSge > maxGs || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, who + ": receive request " + w.wrId + " has " + w.numSge + " SGEs, max " + maxGs, w);
                }
                if (head == tail) {
                    throw new PostException(Errno.ENOMEM, who + ": SRQ full (" + (wqes - 1) + " requests)", w);
                }
                int ind = head;
                long off = (long) ind << shift;
                MemorySegment p = buf.page(off);
                long o = off & 4095;
                wrid[ind] = w.wrId;
                head = p.get(BE16, o + Wqe.SRQ_NEXT_WQE_INDEX) & 0xffff;
                Mlx4Qp.scatter(p, o + Wqe.SRQ_NEXT_SIZE, w, maxGs);
                posted++;
            }
        } finally {
            if (posted > 0) {
                counter = counter + posted & 0xffff;
                VarHandle.releaseFence();
                buf.db().set(BE32, Wqe.DB_RECORD, counter);
            }
            lock.unlock();
        }
    }

    /** The doorbell record as the device reads it: the 16-bit counter of WQEs posted (tools and tests). */
    public int dbRecord() {
        return buf.db().get(BE32, Wqe.DB_RECORD);
    }

    /** The next WQE of WQE {@code index} on the free list, as its next segment in the process's memory says (tools and tests). */
    public int nextOf(int index) {
        long off = (long) (index & wqes - 1) << shift;
        return buf.page(off).get(BE16, (off & 4095) + Wqe.SRQ_NEXT_WQE_INDEX) & 0xffff;
    }

    /** A receive CQE named WQE {@code index}: its work-request id; the WQE goes back on the list ({@code mlx4_free_srq_wqe}). */
    public long completed(int index) {
        lock.lock();
        try {
            int ind = index & wqes - 1;
            long id = wrid[ind];
            long off = (long) tail << shift;
            buf.page(off).set(BE16, (off & 4095) + Wqe.SRQ_NEXT_WQE_INDEX, (short) ind);
            tail = ind;
            return id;
        } finally {
            lock.unlock();
        }
    }
}
