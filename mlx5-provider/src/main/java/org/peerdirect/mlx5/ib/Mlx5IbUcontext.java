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
 * doorbells on; on a device with DevX its uid ({@code devx_uid}), which its PDs, CQs and UAR carry,
 * and its DevX methods ({@link Mlx5Devx}, reached through {@link #driverMethod}).
 */
final class Mlx5IbUcontext implements IbUcontextOps {

    final Mlx5IbDev dev;
    final AddressSpace process;
    final UarPage uar;
    /** The DevX uid (0: the device has no DevX) and the DevX objects (null then). */
    final int uid;
    final Mlx5Devx devx;
    private boolean closed;

    Mlx5IbUcontext(Mlx5IbDev dev, AddressSpace process, int uar, int uid) {
        this.dev = dev;
        this.process = process;
        this.uar = new UarPage(dev.core.function(), uar);
        this.uid = uid;
        this.devx = uid == 0 ? null : Mlx5Devx.of(dev, this, uid);
    }

    /** A command input of this context: its uid in the header ({@code MLX5_SET(..., uid, context->devx_uid)}). */
    MemorySegment input(int opcode, int len) {
        MemorySegment in = Mlx5CoreDev.input(opcode, 0, len);
        org.peerdirect.hca.cx4.ifc.Devx.UID.set(in, 0, uid);
        return in;
    }

    @Override
    public IbPdOps allocPd() {
        int pdn = dev.execIndex(input(Mlx5Cmd.ALLOC_PD, 16), 16);
        return new Mlx5IbPd(this, pdn);
    }

    /**
     * The DevX methods ({@code MLX5_IB_METHOD_DEVX_*}) the user library calls
     * ({@link org.peerdirect.mlx5.dv.Mlx5dv}); EOPNOTSUPP on a device without DevX.
     */
    @Override
    public Object driverMethod(String method, Object... a) {
        if ("DV_OBJ_PD".equals(method)) {
            return pdn(a);
        }
        if (devx == null) {
            throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EOPNOTSUPP,
                    dev.name() + ": " + method + ": the device has no DevX");
        }
        try {
            return switch (method) {
                case "DEVX_OBJ_CREATE" -> devx.objCreate((byte[]) a[0], (Integer) a[1]);
                case "DEVX_OTHER" -> devx.generalCmd((byte[]) a[0], (Integer) a[1]);
                case "DEVX_OBJ_QUERY" -> devx.objCommand((Integer) a[0], (byte[]) a[1], (Integer) a[2], false);
                case "DEVX_OBJ_MODIFY" -> devx.objCommand((Integer) a[0], (byte[]) a[1], (Integer) a[2], true);
                case "DEVX_OBJ_DESTROY" -> {
                    devx.destroy((Integer) a[0], Mlx5Devx.Kind.OBJ);
                    yield null;
                }
                case "DEVX_UMEM_REG" -> a.length == 3 ? devx.umemReg((Long) a[0], (Long) a[1], (Integer) a[2])
                        : devx.umemRegEx((Long) a[0], (Long) a[1], (Integer) a[2], (Integer) a[3], (Long) a[4]);
                case "DEVX_UMEM_DEREG" -> {
                    devx.destroy((Integer) a[0], Mlx5Devx.Kind.UMEM);
                    yield null;
                }
                case "DEVX_UAR_ALLOC" -> devx.uarAlloc();
                case "DEVX_UAR_WRITE64" -> {
                    devx.uarWrite64((Integer) a[0], (Long) a[1], (Long) a[2]);
                    yield null;
                }
                case "DEVX_QUERY_EQN" -> dev.core.compEqn(); // mlx5_ib_devx_query_eqn: the completion EQ (one vector)
                case "DEVX_UAR_FREE" -> {
                    devx.destroy((Integer) a[0], Mlx5Devx.Kind.UAR);
                    yield null;
                }
                case "DEVX_ASYNC_EVENT_FD_ALLOC" -> devx.events.createChannel();
                case "DEVX_SUBSCRIBE_EVENT" -> {
                    devx.events.subscribe((Integer) a[0], (Integer) a[1], (int[]) a[2], (Long) a[3]);
                    yield null;
                }
                case "DEVX_EVENT_READ" -> {
                    Mlx5DevxEvents.Event e = devx.events.read((Integer) a[0], (Long) a[1]);
                    yield e == null ? null : new long[] {e.cookie(), e.eventType(), e.objType(), e.objId() & 0xffff_ffffL};
                }
                case "DEVX_ASYNC_EVENT_FD_CLOSE" -> {
                    devx.events.destroyChannel((Integer) a[0]);
                    yield null;
                }
                default -> throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EOPNOTSUPP,
                        dev.name() + ": no driver method " + method);
            };
        } catch (ClassCastException | ArrayIndexOutOfBoundsException e) {
            throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EINVAL,
                    dev.name() + ": " + method + ": bad attributes (" + e.getMessage() + ")");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EINTR, method + " interrupted");
        }
    }

    /**
     * {@code mlx5dv_init_obj(MLX5DV_OBJ_PD)}: the PD's number, what {@code mlx5_ib_alloc_pd} returned
     * in its response ({@code mlx5_ib_alloc_pd_resp.pdn}) and libmlx5 keeps; the core looked the PD
     * up among this context's objects (another context's is ENOENT there).
     */
    private Object pdn(Object[] a) {
        if (a.length != 1 || !(a[0] instanceof Mlx5IbPd pd) || pd.ctx != this) {
            throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EINVAL,
                    dev.name() + ": DV_OBJ_PD: one PD of this context");
        }
        return pd.pdn;
    }

    /** Close or exit, before the core's objects: the DevX objects by rank, umems, UARs ({@link Mlx5Devx#destroyAll}). */
    @Override
    public void destroyDriverObjects() {
        if (devx != null) {
            devx.destroyAll();
        }
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
        MemorySegment in = input(Mlx5Cmd.CREATE_CQ, (int) Cq.CREATE_CQ_IN_PAS + 8 * npages);
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
            if (devx != null) {
                devx.destroyAll(); // already done at the core's close; again for a driver-side teardown
                dev.devxContexts.remove(devx);
            }
            dev.destroyQuietly(Mlx5Cmd.DEALLOC_UAR, uar.index);
            Mlx5Devx.destroyUid(dev, uid); // after the core destroyed the uid's PDs and CQs
        }
    }
}
