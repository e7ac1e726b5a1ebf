package org.peerdirect.mlx4;

import java.util.concurrent.atomic.AtomicBoolean;

import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Mtt;
import org.peerdirect.mlx4.lib.Mlx4Buf;
import org.peerdirect.mlx4.lib.Mlx4Uar;

/**
 * {@code struct mlx4_ib_ucontext}: the device opened by one process, with a UAR page of its own
 * ({@code mlx4_uar_alloc} at open, freed at close) that the library rings its send doorbells on,
 * and the BlueFlame page that goes with it.
 */
final class Mlx4Context implements IbUcontextOps {

    final Mlx4Device dev;
    final AddressSpace process;
    final Mlx4Uar uar;

    Mlx4Context(Mlx4Device dev, AddressSpace process) {
        this.dev = dev;
        this.process = process;
        this.uar = new Mlx4Uar(dev.core.fn, dev.uars.alloc());
    }

    @Override
    public IbPdOps allocPd() {
        return new Mlx4Pd(this, dev.allocPdn());
    }

    /**
     * A queue buffer of the library, pinned and mapped for the device, its pages written into an
     * MTT range ({@code ib_umem_get}, {@code mlx4_mtt_init}, {@code mlx4_ib_umem_write_mtt}). The
     * doorbell record's page is pinned with it but not in the MTT (the context names its bus
     * address). Its umem goes at the object's destruction, or earlier, when the device is gone
     * ({@link #releaseDma}): the mappings must be undone while the function's IOMMU domain still
     * exists, whereas the user may destroy the object much later.
     */
    static final class Pinned {
        private final Mlx4Buf buf;
        private final IbUmem umem;
        private final Mtt.Range mtt;
        private final Mlx4Device dev;
        private final AtomicBoolean dmaReleased = new AtomicBoolean();

        private Pinned(Mlx4Buf buf, IbUmem umem, Mtt.Range mtt, Mlx4Device dev) {
            this.buf = buf;
            this.umem = umem;
            this.mtt = mtt;
            this.dev = dev;
            dev.pins.add(this);
        }

        Mlx4Buf buf() {
            return buf;
        }

        Mtt.Range mtt() {
            return mtt;
        }

        /** The doorbell record's bus address. */
        long dbDma() {
            return umem.dmaAddressOf(buf.dbVa());
        }

        /** The MTT range back (while the device runs: after an unload it went with the ICM), the buffer unmapped and unpinned (once). */
        void releaseDma() {
            if (dmaReleased.compareAndSet(false, true)) {
                dev.pins.remove(this);
                if (dev.core.loaded()) {
                    dev.core.mtt.free(mtt);
                }
                umem.release();
            }
        }

        void release() {
            releaseDma();
            buf.free();
        }
    }

    /** {@code bytes} of queue (whole pages) and a doorbell page in the process, pinned, with the queue's MTT. */
    Pinned pin(long bytes) {
        Mlx4Buf buf = Mlx4Buf.alloc(process, bytes);
        IbUmem umem;
        try {
            umem = dev.umems.umemGet(process, dev, buf.va, buf.length(), IbAccess.LOCAL_WRITE, 0);
        } catch (RuntimeException e) {
            buf.free();
            throw e;
        }
        Mtt.Range mtt = null;
        try {
            buf.resolve();
            long[] all = Mlx4Pd.pages(umem.dmaBlocks());
            mtt = dev.core.mtt.alloc(buf.queuePages());
            dev.core.mtt.write(mtt, 0, java.util.Arrays.copyOf(all, buf.queuePages()));
        } catch (RuntimeException e) {
            dev.core.mtt.free(mtt);
            umem.release();
            buf.free();
            throw e;
        }
        return new Pinned(buf, umem, mtt, dev);
    }

    /**
     * {@code mlx4_ib_create_cq}: a CQN from the table ({@code mlx4_cq_alloc}), the ring and its
     * context to the device ({@link Mlx4Cq#create}). The ring is the driver's DMA memory, as a
     * kernel CQ's ({@code mlx4_ib_alloc_cq_buf}); libmlx4 would allocate it in the process and
     * register it, which changes where the pages come from, not what the device writes.
     */
    @Override
    public IbCqOps createCq(int cqe, IbCqEvents events) {
        int max = dev.core.caps().maxCqSz() - 1;
        if (cqe < 1 || cqe > max) {
            throw new KernelException(Errno.ENOMEM, dev.name + ": CQ size " + cqe + " is not 1.." + max);
        }
        int log = 32 - Integer.numberOfLeadingZeros(cqe - 1);
        int cqn = dev.cqns.alloc();
        Mlx4Cq cq;
        try {
            cq = Mlx4Cq.create(dev, cqn, log, events);
        } catch (RuntimeException e) {
            dev.cqns.free(cqn);
            throw e;
        }
        dev.cqTable[cqn] = cq;
        return cq;
    }

    /** {@code mlx4_ib_dealloc_ucontext}: the core destroyed every object; the UAR page goes back. */
    @Override
    public void deallocUcontext() {
        dev.uars.free(uar.index);
    }
}
