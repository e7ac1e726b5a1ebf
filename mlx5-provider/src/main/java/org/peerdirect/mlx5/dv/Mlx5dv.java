package org.peerdirect.mlx5.dv;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.KernelException;

/**
 * libmlx5's DevX calls ({@code mlx5dv.h}: {@code mlx5dv_devx_obj_create} and friends,
 * {@code mlx5dv_devx_general_cmd},
 * {@code mlx5dv_devx_umem_reg} and {@code _reg_ex}, {@code mlx5dv_devx_alloc_uar}, {@code mlx5dv_init_obj} of a PD,
 * {@code mlx5dv_devx_create_event_channel}, {@code mlx5dv_devx_subscribe_devx_event},
 * {@code mlx5dv_devx_get_event}): each one driver method of the context
 * ({@link IbvContext#driverMethod}, the ioctl of {@code MLX5_IB_METHOD_DEVX_*}), the control path.
 * The commands are the PRM's bytes ({@code mlx5_ifc.h}) the caller builds; the driver puts the
 * context's uid in them, whatever the caller wrote there.
 *
 * @see <a href="https://github.com/linux-rdma/rdma-core/blob/master/providers/mlx5/mlx5dv.h">mlx5dv.h</a>
 */
public final class Mlx5dv {

    private Mlx5dv() {
    }

    /** {@code struct mlx5dv_devx_obj}: an object made by a command; {@link #out} is what the create command returned. */
    public static final class DevxObj {
        final IbvContext ctx;
        final int handle;
        private final byte[] out;

        DevxObj(IbvContext ctx, int handle, byte[] out) {
            this.ctx = ctx;
            this.handle = handle;
            this.out = out;
        }

        /** The create command's output. */
        public MemorySegment out() {
            return MemorySegment.ofArray(out.clone());
        }

        @Override
        public String toString() {
            return "devx obj " + handle + " of " + ctx;
        }
    }

    /** {@code struct mlx5dv_devx_umem}: {@link #umemId} names it in commands ({@code cq_umem_id}, ...). */
    public record DevxUmem(IbvContext ctx, int handle, int umemId) {
    }

    /** {@code struct mlx5dv_devx_uar}: {@link #page} is its UAR page number ({@code page_id}), what queue contexts name. */
    public record DevxUar(IbvContext ctx, int handle, int page) {
    }

    /** {@code struct mlx5dv_devx_event_channel}: read like its fd ({@link #getEvent}). */
    public record DevxEventChannel(IbvContext ctx, int id) {
    }

    /** {@code struct mlx5dv_devx_async_event_hdr}: the subscription's cookie and the event's type, object type and id. */
    public record DevxEvent(long cookie, int eventType, int objType, int objId) {
    }

    private static byte[] bytes(MemorySegment in) {
        return in.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
    }

    /**
     * {@code mlx5dv_init_obj} with {@code MLX5DV_OBJ_PD}: the verbs PD's number ({@code struct
     * mlx5dv_pd.pdn}), what DevX commands name as {@code pd} (a window's PD, an mkey's). ENOENT for a
     * PD of another context; EINVAL for a PD of another driver.
     *
     * @since 0.2
     */
    public static int initObjPd(org.peerdirect.ib.core.verbs.IbvPd pd) {
        return (Integer) pd.context().driverMethod("DV_OBJ_PD", pd);
    }

    /** {@code mlx5dv_devx_obj_create(ctx, in, inlen, out, outlen)}. */
    public static DevxObj devxObjCreate(IbvContext ctx, MemorySegment in, int outLen) {
        Object[] r = (Object[]) ctx.driverMethod("DEVX_OBJ_CREATE", bytes(in), outLen);
        return new DevxObj(ctx, (Integer) r[0], (byte[]) r[1]);
    }

    /**
     * {@code mlx5dv_devx_general_cmd(ctx, in, inlen, out, outlen)}: a command on no object
     * ({@code MLX5_IB_METHOD_DEVX_OTHER}); the driver lets only the general queries through
     * ({@code QUERY_HCA_CAP} and the like) and refuses others with EINVAL naming the command.
     */
    public static MemorySegment devxGeneralCmd(IbvContext ctx, MemorySegment in, int outLen) {
        return MemorySegment.ofArray((byte[]) ctx.driverMethod("DEVX_OTHER", bytes(in), outLen));
    }

    /** {@code mlx5dv_devx_obj_query}: the command must act on {@code obj}. */
    public static MemorySegment devxObjQuery(DevxObj obj, MemorySegment in, int outLen) {
        return MemorySegment.ofArray((byte[]) obj.ctx.driverMethod("DEVX_OBJ_QUERY", obj.handle, bytes(in), outLen));
    }

    /** {@code mlx5dv_devx_obj_modify}: the command must act on {@code obj}. */
    public static MemorySegment devxObjModify(DevxObj obj, MemorySegment in, int outLen) {
        return MemorySegment.ofArray((byte[]) obj.ctx.driverMethod("DEVX_OBJ_MODIFY", obj.handle, bytes(in), outLen));
    }

    /** {@code mlx5dv_devx_obj_destroy}: EBUSY (the object is in use) keeps it. */
    public static void devxObjDestroy(DevxObj obj) {
        obj.ctx.driverMethod("DEVX_OBJ_DESTROY", obj.handle);
    }

    /** {@code mlx5dv_devx_umem_reg(ctx, addr, size, access)}: the process's memory pinned and given to the device. */
    public static DevxUmem devxUmemReg(IbvContext ctx, long addr, long size, int access) {
        Object[] r = (Object[]) ctx.driverMethod("DEVX_UMEM_REG", addr, size, access);
        return new DevxUmem(ctx, (Integer) r[0], (Integer) r[1]);
    }

    /** {@code MLX5DV_UMEM_MASK_DMABUF}: {@link DevxUmemIn#dmabufFd} is valid. */
    public static final long UMEM_MASK_DMABUF = 1L << 0;

    /**
     * {@code struct mlx5dv_devx_umem_in}: with {@link #UMEM_MASK_DMABUF} in {@code compMask},
     * {@code addr} is the offset in the dma-buf open under {@code dmabufFd}; {@code pgszBitmap} the
     * page sizes the use accepts (the model's umems map 4 KiB pages, so it must have bit 12).
     *
     * @since 0.2
     */
    public record DevxUmemIn(long addr, long size, int access, long pgszBitmap, long compMask, int dmabufFd) {
    }

    /**
     * {@code mlx5dv_devx_umem_reg_ex}: EOPNOTSUPP for an unknown {@code comp_mask} bit (as libmlx5);
     * EINVAL when no page size of the bitmap fits ({@code devx_umem_find_best_pgsize} finding none:
     * the model's is 4 KiB); with {@link #UMEM_MASK_DMABUF} the dma-buf's range, pinned
     * ({@code ib_umem_dmabuf_get_pinned}).
     *
     * @since 0.2
     */
    public static DevxUmem devxUmemRegEx(IbvContext ctx, DevxUmemIn in) {
        if ((in.compMask() & ~UMEM_MASK_DMABUF) != 0) {
            throw new KernelException(KernelException.Errno.EOPNOTSUPP, String.format("mlx5dv_devx_umem_reg_ex: comp_mask 0x%x", in.compMask()));
        }
        int fd = (in.compMask() & UMEM_MASK_DMABUF) != 0 ? in.dmabufFd() : -1;
        Object[] r = (Object[]) ctx.driverMethod("DEVX_UMEM_REG", in.addr(), in.size(), in.access(), fd, in.pgszBitmap());
        return new DevxUmem(ctx, (Integer) r[0], (Integer) r[1]);
    }

    /** {@code mlx5dv_devx_umem_dereg}: EBUSY while a queue or mkey uses it. */
    public static void devxUmemDereg(DevxUmem umem) {
        umem.ctx().driverMethod("DEVX_UMEM_DEREG", umem.handle());
    }

    /** {@code mlx5dv_devx_alloc_uar}: a UAR page of the context's uid. */
    public static DevxUar devxAllocUar(IbvContext ctx) {
        Object[] r = (Object[]) ctx.driverMethod("DEVX_UAR_ALLOC");
        return new DevxUar(ctx, (Integer) r[0], (Integer) r[1]);
    }

    /**
     * A 64-bit store of {@code value}'s bytes (in memory order) at {@code offset} of the UAR page, as
     * a program stores through the {@code reg_addr} mapping {@code mlx5dv_devx_alloc_uar} gives it
     * (doorbells of DevX queues: the CQ doorbell, a send queue's BlueFlame register).
     */
    public static void devxUarWrite64(DevxUar uar, long offset, long value) {
        uar.ctx().driverMethod("DEVX_UAR_WRITE64", uar.handle(), offset, value);
    }

    /** {@code mlx5dv_devx_free_uar}. */
    public static void devxFreeUar(DevxUar uar) {
        uar.ctx().driverMethod("DEVX_UAR_FREE", uar.handle());
    }

    /** {@code mlx5dv_devx_query_eqn(ctx, vector, &eqn)}: the EQ a CQ of {@code vector} names ({@code c_eqn}). */
    public static int devxQueryEqn(IbvContext ctx, int vector) {
        return (Integer) ctx.driverMethod("DEVX_QUERY_EQN", vector);
    }

    /** {@code mlx5dv_devx_create_event_channel}. */
    public static DevxEventChannel devxCreateEventChannel(IbvContext ctx) {
        return new DevxEventChannel(ctx, (Integer) ctx.driverMethod("DEVX_ASYNC_EVENT_FD_ALLOC"));
    }

    /** {@code mlx5dv_devx_destroy_event_channel}. */
    public static void devxDestroyEventChannel(DevxEventChannel ch) {
        ch.ctx().driverMethod("DEVX_ASYNC_EVENT_FD_CLOSE", ch.id());
    }

    /** {@code mlx5dv_devx_subscribe_devx_event(channel, obj, events, cookie)}. */
    public static void devxSubscribeDevxEvent(DevxEventChannel ch, DevxObj obj, int[] eventTypes, long cookie) {
        ch.ctx().driverMethod("DEVX_SUBSCRIBE_EVENT", ch.id(), obj.handle, eventTypes.clone(), cookie);
    }

    /**
     * {@code mlx5dv_devx_get_event}: the next event, waiting up to {@code timeout} (a blocking
     * read of the channel's fd), or null; EIO once the context is closed.
     */
    public static DevxEvent devxGetEvent(DevxEventChannel ch, Duration timeout) {
        Object e = ch.ctx().driverMethod("DEVX_EVENT_READ", ch.id(), timeout.toMillis());
        if (e == null) {
            return null;
        }
        if (e instanceof long[] v && v.length == 4) { // the bytes of struct mlx5dv_devx_async_event_hdr, as read from the fd
            return new DevxEvent(v[0], (int) v[1], (int) v[2], (int) v[3]);
        }
        throw new KernelException(KernelException.Errno.EINVAL, "DevX event of an unknown form: " + e);
    }
}
