package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Cq;
import org.peerdirect.mlx5.lib.UarPage;
import org.peerdirect.mlx5.lib.UserBuf;

/**
 * {@code struct mlx5_ib_ucontext}: the device opened by one process, with its own UAR page
 * ({@code ALLOC_UAR} at open, {@code DEALLOC_UAR} at close) that the library rings its CQ and QP
 * doorbells on.
 */
final class Mlx5IbUcontext implements IbUcontextOps {

    final Mlx5IbDev dev;
    final AddressSpace process;
    final UarPage uar;
    private boolean closed;

    Mlx5IbUcontext(Mlx5IbDev dev, AddressSpace process, int uar) {
        this.dev = dev;
        this.process = process;
        this.uar = new UarPage(dev.core.function(), uar);
    }

    @Override
    public IbPdOps allocPd() {
        int pdn = dev.execIndex(Mlx5CoreDev.input(Mlx5Cmd.ALLOC_PD, 0, 16), 16);
        return new Mlx5IbPd(this, pdn);
    }

    /**
     * A queue buffer of the library, pinned and mapped for the device ({@code ib_umem_get} of
     * {@code mlx5_ib}). Its umem goes at the object's destruction, or earlier, when the device is
     * gone ({@link #releaseDma}, the reset flow): the mappings must be undone while the function's
     * IOMMU domain still exists, whereas the user may close the object much later.
     */
    static final class Pinned {
        private final UserBuf buf;
        private final IbUmem umem;
        private final Mlx5IbDev dev;
        private final java.util.concurrent.atomic.AtomicBoolean dmaReleased = new java.util.concurrent.atomic.AtomicBoolean();

        Pinned(UserBuf buf, IbUmem umem, Mlx5IbDev dev) {
            this.buf = buf;
            this.umem = umem;
            this.dev = dev;
            dev.pins.add(this);
        }

        UserBuf buf() {
            return buf;
        }

        long pa(int page) {
            return umem.dmaAddressOf(buf.va + 4096L * page);
        }

        /**
         * {@code ib_umem_copy_from}: {@code len} bytes of the buffer from {@code off}, read through
         * the pinned pages (what the page-fault handler reads a WQE with).
         */
        byte[] read(long off, int len) {
            if (off < 0 || len < 0 || off + len > buf.queueBytes) {
                throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EFAULT,
                        String.format("queue buffer read of %d bytes at %d: the queue has %d bytes", len, off, buf.queueBytes));
            }
            byte[] b = new byte[len];
            for (int done = 0; done < len;) {
                long at = off + done;
                int n = (int) Math.min(len - done, 4096 - (at & 4095));
                MemorySegment.copy(buf.process.pinnedPageView(buf.va + (at & ~4095L)), java.lang.foreign.ValueLayout.JAVA_BYTE, at & 4095, b, done, n);
                done += n;
            }
            return b;
        }

        /** Unmaps and unpins the buffer (once); the process keeps its memory. */
        void releaseDma() {
            if (dmaReleased.compareAndSet(false, true)) {
                dev.pins.remove(this);
                umem.release();
            }
        }

        void release() {
            releaseDma();
            buf.free();
        }
    }

    Pinned pin(long queueBytes) {
        UserBuf buf = UserBuf.alloc(process, queueBytes);
        IbUmem umem;
        try {
            umem = dev.umems.umemGet(process, dev, buf.va, buf.length(), org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE, 0);
        } catch (RuntimeException e) {
            buf.free();
            throw e;
        }
        buf.resolve();
        return new Pinned(buf, umem, dev);
    }

    /**
     * {@code mlx5_ib_create_cq} with libmlx5's {@code mlx5_create_cq}: a ring of 2^n 64-byte CQEs
     * (n for {@code cqe + 1} entries) in the process's memory, every CQE INVALID, the doorbell
     * record after it; {@code CREATE_CQ} on the completion EQ and the context's UAR.
     */
    @Override
    public IbCqOps createCq(int cqe, IbCqEvents events) {
        int logSize = 32 - Integer.numberOfLeadingZeros(cqe); // entries >= cqe + 1
        Pinned p = pin((long) Cq.CQE_SIZE << logSize);
        Mlx5Cq.initRing(p.buf(), logSize);
        int npages = (int) (p.buf().queueBytes / 4096);
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_CQ, 0, (int) Cq.CREATE_CQ_IN_PAS + 8 * npages);
        long c = Cq.CREATE_CQ_IN_CQC;
        Cq.CQC_LOG_CQ_SIZE.set(in, c, logSize);
        Cq.CQC_UAR_PAGE.set(in, c, uar.index);
        Cq.CQC_C_EQN.set(in, c, dev.core.compEqn());
        in.set(BE64, c + Cq.CQC_DBR_ADDR, p.pa(npages));
        for (int i = 0; i < npages; i++) {
            in.set(BE64, Cq.CREATE_CQ_IN_PAS + 8L * i, p.pa(i));
        }
        int cqn;
        try {
            cqn = dev.execIndex(in, 16);
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        Mlx5Cq cq = new Mlx5Cq(cqn, events, p.buf(), logSize, uar, dev.qpTable, dev.srqTable, () -> {
            dev.core.unregisterCq(cqn);
            dev.destroyQuietly(Mlx5Cmd.DESTROY_CQ, cqn);
            p.release();
        });
        dev.core.registerCq(cqn, new Mlx5CoreDev.CqEvents() {
            @Override
            public void completion() {
                cq.completionEvent();
            }

            @Override
            public void error() {
                cq.overrun();
                events.error();
            }
        });
        return cq;
    }

    /** {@code mlx5_ib_alloc_xrcd}: {@code ALLOC_XRCD}; the domain is the device's (see {@link Mlx5Xrcd}). */
    @Override
    public org.peerdirect.ib.core.provider.IbXrcdOps allocXrcd() {
        return new Mlx5Xrcd(dev, dev.allocXrcd());
    }

    /**
     * {@code mlx5_ib_create_qp} of an {@code IB_QPT_XRC_TGT}: {@link Mlx5XrcTgtQp}, on the core's
     * UAR page rather than this context's: the QP is the device's (the kernel creates it, and
     * {@code ibv_open_qp} handles keep it after this context is gone); it has no send queue to ring.
     */
    @Override
    public org.peerdirect.ib.core.provider.IbQpOps createXrcTgtQp(org.peerdirect.ib.core.provider.IbXrcdOps xrcd,
            org.peerdirect.ib.core.provider.IbEvents events) {
        return Mlx5XrcTgtQp.create(dev, (Mlx5Xrcd) xrcd, dev.core.uarIndex(), events);
    }

    @Override
    public synchronized void deallocUcontext() {
        if (!closed) {
            closed = true;
            dev.destroyQuietly(Mlx5Cmd.DEALLOC_UAR, uar.index);
        }
    }
}
