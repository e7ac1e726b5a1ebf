package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.DpaCap;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * DevX of one user context ({@code drivers/infiniband/hw/mlx5/devx.c}): the context's uid
 * ({@code CREATE_UCTX} at open, {@link #create}; {@code DESTROY_UCTX} at close), and the methods
 * the user library calls through the core ({@code MLX5_IB_METHOD_DEVX_*}): objects made by
 * commands the user builds ({@code devx_obj_create}: general objects, CQs, QPs, mkeys, PDs; the
 * uid of every command is the driver's, whatever the user wrote there, and the command must be one
 * DevX allows), their query, modify and destroy (the command must name the handle's object:
 * {@code devx_is_valid_obj_id}), umems over pinned process memory ({@code devx_umem_reg}), UARs,
 * and event channels ({@link Mlx5DevxEvents}).
 *
 * <p>Cleanup ({@link #destroyAll}, at close and at the process's exit, before the core destroys
 * its objects): objects by dependency rank ({@link #rank}: DPA threads, then queues, then windows
 * and outboxes, then DPA processes, then DPA memory; in reverse creation order within a rank), then
 * umems, then UARs; the uid goes last ({@link #destroyUid}, after the core's PDs and CQs of the
 * uid). So no window DMA can follow the MRs' deregistration.
 *
 * <p>Lock rules: {@link #objects} is a concurrent map; a method runs on the calling process's
 * thread, commands serialise in the core's command interface.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/hw/mlx5/devx.c">devx.c</a>
 */
final class Mlx5Devx {

    /** What a handle names: an object made by a command, a umem, a UAR. */
    enum Kind {
        OBJ, UMEM, UAR
    }

    /**
     * A DevX handle ({@code struct devx_obj}, {@code struct devx_umem}, a DevX UAR): the command
     * that destroys it ({@code dinbox}), its {@code obj_type} and id for the validity and event
     * checks, its dependency rank, and what its destroy releases after the command (a umem's pages:
     * {@code ib_umem_release}; null for none).
     */
    record Handle(int id, Kind kind, int opcode, int objType, int objId, MemorySegment destroy, int rank, Runnable release) {
    }

    private final Mlx5IbDev dev;
    final int uid;
    private final Mlx5IbUcontext uctx;
    private final Map<Integer, Handle> objects = new ConcurrentHashMap<>();
    /**
     * Handle numbers, unique across contexts: the kernel's are per uverbs file (an IDR), so a handle
     * of another context names nothing there or, by chance, an object of the file's own. Unique
     * numbers keep the first: another context's handle is always a lookup miss (ENOENT, {@link #handle}),
     * never a silent alias of one of this context's objects.
     */
    private static final AtomicInteger NEXT_HANDLE = new AtomicInteger(1);
    final Mlx5DevxEvents events;

    private Mlx5Devx(Mlx5IbDev dev, Mlx5IbUcontext uctx, int uid) {
        this.dev = dev;
        this.uctx = uctx;
        this.uid = uid;
        this.events = new Mlx5DevxEvents(this);
    }

    /** Whether the device reports DevX ({@code MLX5_CAP_GEN(dev, log_max_uctx)}). */
    static boolean supported(Mlx5IbDev dev) {
        return dev.core.cap(HcaCap.LOG_MAX_UCTX) != 0;
    }

    /** {@code mlx5_ib_devx_create}: a uid for a user context (0 on a device without DevX). */
    static int createUid(Mlx5IbDev dev) {
        if (!supported(dev)) {
            return 0;
        }
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_UCTX, 0, Devx.CREATE_UCTX_IN_LEN);
        return Devx.CREATE_UCTX_OUT_UID.get(dev.cmd(() -> dev.core.exec(in, 16)), 0);
    }

    /** {@code mlx5_ib_devx_destroy}: refused by the firmware while the uid owns anything. */
    static void destroyUid(Mlx5IbDev dev, int uid) {
        if (uid == 0) {
            return;
        }
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.DESTROY_UCTX, 0, 16);
        Devx.DESTROY_UCTX_IN_UID.set(in, 0, uid);
        try {
            dev.cmd(() -> dev.core.exec(in, 16));
        } catch (KernelException e) {
            if (dev.core.isUp()) {
                throw e;
            }
        }
    }

    static Mlx5Devx of(Mlx5IbDev dev, Mlx5IbUcontext uctx, int uid) {
        return new Mlx5Devx(dev, uctx, uid);
    }

    /** The command with the driver's uid in its header: the user's value there is never trusted. */
    private MemorySegment stamped(byte[] cmd) {
        if (cmd.length < 16) {
            throw new KernelException(Errno.EINVAL, "DevX: a command has at least 16 bytes, not " + cmd.length);
        }
        MemorySegment in = MemorySegment.ofArray(cmd.clone());
        Devx.UID.set(in, 0, uid);
        return in;
    }

    private static int opcode(MemorySegment in) {
        return in.get(BE32, 0) >>> 16;
    }

    private static void checkOutLen(int outLen) {
        if (outLen < 16 || outLen > 1 << 20) {
            throw new KernelException(Errno.EINVAL, "DevX: an output of " + outLen + " bytes (16 to 1 MiB)");
        }
    }

    /**
     * The handle's object ({@code uverbs_get_uobject_from_file}): ENOENT when this context holds no
     * such handle (another context's, or destroyed: {@code lookup_get_idr_uobject}), EINVAL when it
     * names an object of another kind ({@code uobj->uapi_object != obj}).
     */
    private Handle handle(int id, Kind kind) {
        Handle h = objects.get(id);
        if (h == null) {
            throw new KernelException(Errno.ENOENT, "DevX: handle " + id + " is no object of this context (uid " + uid + ")");
        }
        if (h.kind() != kind) {
            throw new KernelException(Errno.EINVAL, "DevX: handle " + id + " is no " + kind.name().toLowerCase() + " but a "
                    + h.kind().name().toLowerCase());
        }
        return h;
    }

    private Handle add(Kind kind, int opcode, int objType, int objId, MemorySegment destroy, int rank, Runnable release) {
        Handle h = new Handle(NEXT_HANDLE.getAndIncrement(), kind, opcode, objType, objId, destroy, rank, release);
        objects.put(h.id(), h);
        return h;
    }

    /**
     * {@code devx_obj_create}: the command (one DevX creates objects with), the uid stamped, run;
     * returns the handle and the output. The destroy command is built from the output now
     * ({@code devx_obj_build_destroy_cmd}), so cleanup needs nothing of the user.
     */
    Object[] objCreate(byte[] cmd, int outLen) {
        checkOutLen(outLen);
        MemorySegment in = stamped(cmd);
        int op = opcode(in);
        int objType = op == Mlx5Cmd.CREATE_GENERAL_OBJECT ? Devx.OBJ_TYPE.get(in, 0) : 0;
        int destroyOp = switch (op) {
            case Mlx5Cmd.CREATE_GENERAL_OBJECT -> Mlx5Cmd.DESTROY_GENERAL_OBJECT;
            case Mlx5Cmd.CREATE_CQ -> Mlx5Cmd.DESTROY_CQ;
            case Mlx5Cmd.CREATE_QP -> Mlx5Cmd.DESTROY_QP;
            case Mlx5Cmd.CREATE_MKEY -> Mlx5Cmd.DESTROY_MKEY;
            case Mlx5Cmd.ALLOC_PD -> Mlx5Cmd.DEALLOC_PD;
            default -> throw new KernelException(Errno.EINVAL, "DevX obj_create: " + Mlx5Cmd.name(op) + " creates no object DevX allows");
        };
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, outLen));
        int objId = op == Mlx5Cmd.CREATE_GENERAL_OBJECT ? out.get(BE32, Devx.OBJ_ID) : Pages.INDEX24.get(out, 0);
        MemorySegment destroy = Mlx5CoreDev.input(destroyOp, op == Mlx5Cmd.CREATE_GENERAL_OBJECT ? objType : 0, 16);
        Devx.UID.set(destroy, 0, uid);
        if (op == Mlx5Cmd.CREATE_GENERAL_OBJECT) {
            destroy.set(BE32, Devx.OBJ_ID, objId);
        } else {
            Pages.INDEX24.set(destroy, 0, objId);
        }
        Handle h = add(Kind.OBJ, op, objType, objId, destroy, rank(op, objType), null);
        byte[] o = new byte[outLen];
        MemorySegment.copy(out, 0, MemorySegment.ofArray(o), 0, Math.min(outLen, out.byteSize()));
        return new Object[] {h.id(), o};
    }

    /**
     * The cleanup rank of an object ({@code devx_obj} destroy order at close): what refers to
     * others goes first. DPA threads (their CQs name them), queues and mkeys (an mkey or a ring may
     * be in a DUMEM), windows and outboxes, DPA processes, DPA memory, then PDs.
     */
    static int rank(int opcode, int objType) {
        return switch (opcode) {
            case Mlx5Cmd.CREATE_GENERAL_OBJECT -> switch (objType) {
                case DpaCap.OBJ_DPA_THREAD -> 0;
                case DpaCap.OBJ_DPA_WINDOW, DpaCap.OBJ_DPA_OUTBOX -> 2;
                case DpaCap.OBJ_DPA_PROCESS -> 3;
                case DpaCap.OBJ_DPA_MEM -> 4;
                default -> 2;
            };
            case Mlx5Cmd.CREATE_QP -> 1;
            case Mlx5Cmd.CREATE_CQ -> 1; // after the QPs of the same rank: reverse creation order
            case Mlx5Cmd.CREATE_MKEY -> 1; // before the DPA process or DPA_MEM whose DUMEM it may map
            default -> 6; // PDs
        };
    }

    /**
     * {@code devx_obj_query} / {@code devx_obj_modify}: the command must act on the handle's object
     * ({@code devx_is_valid_obj_id}) and be a query or a modify of its kind.
     */
    byte[] objCommand(int handle, byte[] cmd, int outLen, boolean modify) {
        checkOutLen(outLen);
        Handle h = handle(handle, Kind.OBJ);
        MemorySegment in = stamped(cmd);
        int op = opcode(in);
        boolean ok = switch (h.opcode()) {
            case Mlx5Cmd.CREATE_GENERAL_OBJECT -> op == (modify ? Mlx5Cmd.MODIFY_GENERAL_OBJECT : Mlx5Cmd.QUERY_GENERAL_OBJECT)
                    && Devx.OBJ_TYPE.get(in, 0) == h.objType() && in.get(BE32, Devx.OBJ_ID) == h.objId();
            case Mlx5Cmd.CREATE_CQ -> !modify && op == Mlx5Cmd.QUERY_CQ && Pages.INDEX24.get(in, 0) == h.objId();
            case Mlx5Cmd.CREATE_QP -> (modify ? isQpTransition(op) : op == Mlx5Cmd.QUERY_QP) && Pages.INDEX24.get(in, 0) == h.objId();
            default -> false;
        };
        if (!ok) {
            throw new KernelException(Errno.EINVAL, String.format("DevX obj_%s: %s does not act on handle %d's object (0x%x)",
                    modify ? "modify" : "query", Mlx5Cmd.name(op), handle, h.objId()));
        }
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, outLen));
        byte[] o = new byte[outLen];
        MemorySegment.copy(out, 0, MemorySegment.ofArray(o), 0, Math.min(outLen, out.byteSize()));
        return o;
    }

    /**
     * The commands a user may issue outside any object ({@code devx_is_general_cmd}): queries of
     * the function, its vports and counters, and NOP. Everything else a user sends goes through
     * an object's create, query, modify or destroy, or not at all.
     */
    private static final java.util.Set<Integer> GENERAL_CMDS = java.util.Set.of(Mlx5Cmd.QUERY_HCA_CAP, Mlx5Cmd.QUERY_ADAPTER,
            Mlx5Cmd.QUERY_ISSI, Mlx5Cmd.QUERY_VPORT_STATE, Mlx5Cmd.QUERY_VPORT_COUNTER, Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT,
            Mlx5Cmd.QUERY_HCA_VPORT_GID, Mlx5Cmd.QUERY_Q_COUNTER, Mlx5Cmd.NOP);

    /**
     * {@code MLX5_IB_METHOD_DEVX_OTHER} ({@code mlx5dv_devx_general_cmd}): a command that acts on no
     * object, only one of {@link #GENERAL_CMDS} ({@code devx_is_general_cmd}; EINVAL naming any
     * other), the uid stamped, run; its output.
     */
    byte[] generalCmd(byte[] cmd, int outLen) {
        checkOutLen(outLen);
        MemorySegment in = stamped(cmd);
        int op = opcode(in);
        if (!GENERAL_CMDS.contains(op)) {
            throw new KernelException(Errno.EINVAL, "DevX general_cmd: " + Mlx5Cmd.name(op)
                    + " is no general command a user may issue (queries of the function, its vports and counters, NOP)");
        }
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, outLen));
        byte[] o = new byte[outLen];
        MemorySegment.copy(out, 0, MemorySegment.ofArray(o), 0, Math.min(outLen, out.byteSize()));
        return o;
    }

    private static boolean isQpTransition(int op) {
        return op == Mlx5Cmd.RST2INIT_QP || op == Mlx5Cmd.INIT2RTR_QP || op == Mlx5Cmd.RTR2RTS_QP || op == Mlx5Cmd.RTS2RTS_QP
                || op == Mlx5Cmd.QP_2ERR || op == Mlx5Cmd.QP_2RST || op == Mlx5Cmd.INIT2INIT_QP || op == Mlx5Cmd.SQERR2RTS_QP;
    }

    /** {@code devx_obj_destroy} / {@code devx_umem_dereg} / UAR free: the handle's destroy command; a refusal (in use) keeps it. */
    void destroy(int handle, Kind kind) {
        Handle h = handle(handle, kind);
        run(h);
        objects.remove(handle);
        events.forget(h);
        if (h.release() != null) {
            h.release().run();
        }
    }

    private void run(Handle h) {
        try {
            dev.cmd(() -> dev.core.exec(h.destroy(), 16));
        } catch (KernelException e) {
            if (dev.core.isUp()) {
                throw e;
            }
        }
    }

    /**
     * {@code devx_umem_reg}: {@code length} bytes of the process at {@code addr} pinned and mapped,
     * a {@code CREATE_UMEM} of their 4 KiB pages; returns the handle and the umem id.
     *
     * <p>Peer memory: MLNX_OFED's {@code devx_umem_get} takes the range with
     * {@code ib_umem_get_peer(..., access, 0)}, i.e. {@code IB_PEER_MEM_ALLOW} without
     * {@code IB_PEER_MEM_INVAL_SUPP}: a DevX umem has no invalidation notifier (nothing in DevX could
     * revoke the queues and mkeys the user built over it). So a client that needs no invalidation
     * (nv_mem persistent) may supply the pages; one that requires invalidation (nv_mem with the free
     * callback) is skipped at acquire, and a range nothing else claims fails with the pin's error
     * (EFAULT for device memory) as {@code ib_peer_umem_get} returns it. A DevX umem is therefore never
     * invalidated: the peer memory stays mapped until {@code umem_dereg} (or the context's cleanup).
     */
    Object[] umemReg(long addr, long length, int access) {
        checkRange("umem_reg", addr, length);
        IbUmem umem = dev.umems.umemGet(uctx.process, dev, addr, length, access, UmemService.IB_PEER_MEM_ALLOW);
        try {
            return createUmem(addr, length, umem.writable(), umem::dmaAddressOf, umem::release);
        } catch (RuntimeException e) {
            umem.release();
            throw e;
        }
    }

    /**
     * {@code MLX5_IB_METHOD_DEVX_UMEM_REG} with {@code MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP} (and a
     * dma-buf fd, or -1): the bitmap must admit a page size the umem can use
     * ({@code devx_umem_find_best_pgsize}; the model's umems map 4 KiB pages, so bit 12), else EINVAL.
     */
    Object[] umemRegEx(long addr, long length, int access, int fd, long pgszBitmap) {
        if ((pgszBitmap & 4096) == 0) {
            throw new KernelException(Errno.EINVAL, String.format("DevX umem_reg: no page size of pgsz_bitmap 0x%x fits"
                    + " (devx_umem_find_best_pgsize; the umem maps 4 KiB pages)", pgszBitmap));
        }
        return fd >= 0 ? umemRegDmabuf(addr, length, access, fd) : umemReg(addr, length, access);
    }

    /**
     * {@code devx_umem_get} with {@code MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD}
     * ({@code mlx5dv_devx_umem_reg_ex} with {@code MLX5DV_UMEM_MASK_DMABUF}): [offset, offset+length)
     * of the dma-buf open under {@code fd}, imported pinned ({@code ib_umem_dmabuf_get_pinned}: the
     * exporter may not move it while the umem lives), a {@code CREATE_UMEM} of its 4 KiB pages.
     */
    Object[] umemRegDmabuf(long offset, long length, int access, int fd) {
        checkRange("umem_reg dmabuf", offset, length);
        org.peerdirect.ib.core.umem.IbUmemDmabuf umem = dev.umems.umemDmabufGetPinned(uctx.process, dev, offset, length, fd, access, null);
        try {
            // byte k of the range is dmaAddressOf(k); the umem's addresses are the buffer's offsets
            return createUmem(offset, length, umem.writable(), o -> umem.dmaAddressOf(o - offset), umem::release);
        } catch (RuntimeException e) {
            umem.release();
            throw e;
        }
    }

    private static void checkRange(String what, long addr, long length) {
        if (length <= 0 || addr < 0 || addr + length < addr) {
            throw new KernelException(Errno.EINVAL, String.format("DevX %s: %d bytes at 0x%x", what, length, addr));
        }
    }

    /**
     * {@code devx_umem_reg_cmd_build} + the command: the MTT of the pages of [addr, addr+length),
     * {@code dma} giving the DMA address of a byte at an address of the range; the handle owns
     * {@code release}. Returns the handle and the umem id.
     */
    private Object[] createUmem(long addr, long length, boolean writable, java.util.function.LongUnaryOperator dma, Runnable release) {
        long first = addr & ~0xfffL;
        int n = (int) (((addr & 0xfff) + length + 4095) >>> 12);
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_UMEM, 0, (int) Devx.UMEM_MTT + 8 * n);
        Devx.UID.set(in, 0, uid);
        in.set(BE32, Devx.UMEM_PAGE_OFFSET, (int) (addr & 0xfff));
        in.set(BE64, Devx.UMEM_NUM_OF_MTT, n);
        long flags = Mkey.MTT_READ | (writable ? Mkey.MTT_WRITE : 0);
        for (int i = 0; i < n; i++) {
            in.set(BE64, Devx.UMEM_MTT + 8L * i, dma.applyAsLong(Math.max(addr, first + 4096L * i)) & ~0xfffL | flags);
        }
        int id = Devx.UMEM_ID.get(dev.cmd(() -> dev.core.exec(in, 16)), 0);
        MemorySegment destroy = Mlx5CoreDev.input(Mlx5Cmd.DESTROY_UMEM, 0, 16);
        Devx.UID.set(destroy, 0, uid);
        Devx.UMEM_ID.set(destroy, 0, id);
        Handle h = add(Kind.UMEM, Mlx5Cmd.CREATE_UMEM, 0, id, destroy, 7, release);
        return new Object[] {h.id(), id};
    }

    /** {@code MLX5_IB_METHOD_DEVX_UAR_ALLOC} ({@code mlx5dv_devx_alloc_uar}): an {@code ALLOC_UAR} of the uid; returns the handle and the page. */
    Object[] uarAlloc() {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.ALLOC_UAR, 0, 16);
        Devx.UID.set(in, 0, uid);
        int page = Pages.INDEX24.get(dev.cmd(() -> dev.core.exec(in, 16)), 0);
        MemorySegment destroy = Mlx5CoreDev.input(Mlx5Cmd.DEALLOC_UAR, 0, 16);
        Devx.UID.set(destroy, 0, uid);
        Pages.INDEX24.set(destroy, 0, page);
        Handle h = add(Kind.UAR, Mlx5Cmd.ALLOC_UAR, 0, page, destroy, 8, null);
        return new Object[] {h.id(), page};
    }

    /**
     * A 64-bit store at {@code off} of the UAR page of handle {@code handle}: the user's store to
     * the page {@code mlx5dv_devx_alloc_uar} mapped ({@code reg_addr}); only a UAR of this context.
     */
    void uarWrite64(int handle, long off, long value) {
        Handle h = handle(handle, Kind.UAR);
        if (off < 0 || off > 4088 || (off & 7) != 0) {
            throw new KernelException(Errno.EINVAL, "DevX UAR: offset 0x" + Long.toHexString(off) + " is outside the page or unaligned");
        }
        dev.core.function().write64(0, ((long) h.objId() << 12) + off, value);
    }

    /** The objects of this context, in the order {@link #destroyAll} takes them. */
    List<Handle> cleanupOrder() {
        List<Handle> all = new ArrayList<>(objects.values());
        all.sort(Comparator.comparingInt(Handle::rank).thenComparing(Comparator.comparingInt(Handle::id).reversed()));
        return all;
    }

    /** Close or exit: every object, umem and UAR, by rank; what the firmware refuses is logged and left (its uid's destroy will say so). */
    void destroyAll() {
        events.close();
        for (Handle h : cleanupOrder()) {
            try {
                run(h);
            } catch (KernelException e) {
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING,
                        dev.name() + ": DevX cleanup of uid " + uid + ": " + Mlx5Cmd.name(h.destroy().get(BE32, 0) >>> 16) + " refused: " + e.getMessage());
            }
            objects.remove(h.id());
            if (h.release() != null) {
                h.release().run();
            }
        }
    }

    /** The live handles (tests, tools). */
    int live() {
        return objects.size();
    }

    /** The object a handle names, for an event subscription: its obj_type (0 for a queue) and id. */
    Handle object(int handle) {
        return handle(handle, Kind.OBJ);
    }
}
