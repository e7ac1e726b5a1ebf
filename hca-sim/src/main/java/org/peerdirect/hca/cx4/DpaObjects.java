package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.dpa.Affinity;
import org.peerdirect.hca.dpa.DpaMemoryExhausted;
import org.peerdirect.hca.dpa.DpaUnit;
import org.peerdirect.hca.dpa.ImageRejected;

/**
 * The DPA general objects (DPA_MEM 0x28, DPA_PROCESS 0x2a, DPA_THREAD 0x2b, DPA_OUTBOX 0x2d,
 * DPA_WINDOW 0x39) over a BlueField-3's {@link DpaUnit}, in the "peerdirect PRM extension v1"
 * layouts of {@link org.peerdirect.hca.cx4.ifc.DpaObj}. The general-object dispatcher checks an
 * object's existence, type and uid for modify, query and destroy; these types check what their
 * fields name (a process, a DPA_MEM of another uid is refused) and refuse destroying a process
 * while its threads, outboxes or windows live (the driver's cleanup destroys in reverse
 * dependency order).
 *
 * <p>Syndromes of the DPA objects ({@code 0x0bad_03NN}, beside {@link Syndromes}' ranges; kept
 * here until the lead merges the syndrome tables).
 */
final class DpaObjects {

    static final int SYND_DPA_BAD_PARAM = 0x0bad_0301;
    static final int SYND_DPA_IMAGE = 0x0bad_0302;
    static final int SYND_DPA_MEM_EXHAUSTED = 0x0bad_0303;
    static final int SYND_DPA_OTHER_UID = 0x0bad_0304;
    static final int SYND_DPA_NO_SUCH = 0x0bad_0305;
    static final int SYND_DPA_IN_USE = 0x0bad_0306;

    /** What the firmware keeps of one DPA object beside the unit's own state. */
    private record Obj(int type, int uid, int unitId, int process, int pd, int uar, int dumem) {
        Obj(int type, int uid, int unitId, int process, int pd, int uar) {
            this(type, uid, unitId, process, pd, uar, 0);
        }
    }

    private final DpaUnit unit;
    private final Umems umems;
    private final Map<Integer, Obj> objs = new ConcurrentHashMap<>();

    /** {@code umems} names the DUMEMs of DPA_MEMs and process heaps ({@link org.peerdirect.hca.cx4.ifc.DpaObj#DUMEM}). */
    DpaObjects(DpaUnit unit, Umems umems) {
        this.unit = unit;
        this.umems = umems;
    }

    /** The five types, for the dispatcher's table (the lead registers them in Firmware after wt-bf3 lands). */
    List<GeneralObjectType> types() {
        return List.of(new Mem(), new Process(), new Thread(), new Outbox(), new Window());
    }

    /** The object {@code id} of {@code type}, owned by {@code uid}; refused otherwise. */
    private Obj ref(int uid, int id, int type, String what) throws Refused {
        Obj o = objs.get(id);
        if (o == null || o.type != type) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_DPA_NO_SUCH, what + " " + id + " is no such object");
        }
        if (o.uid != uid) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_DPA_OTHER_UID, what + " " + id + " belongs to another uid");
        }
        return o;
    }

    /** Runs a unit operation, turning its refusals into command statuses. */
    private interface Op<T> {
        T run() throws ImageRejected;
    }

    private static <T> T unitOp(Op<T> op) throws Refused {
        try {
            return op.run();
        } catch (ImageRejected e) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_DPA_IMAGE, e.getMessage());
        } catch (DpaMemoryExhausted e) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, SYND_DPA_MEM_EXHAUSTED, e.getMessage());
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_DPA_BAD_PARAM, e.getMessage());
        }
    }

    private int add(Obj o) {
        objs.put(o.unitId, o);
        return o.unitId;
    }

    private static final long CTX = 0x10;

    private final class Mem implements GeneralObjectType {
        public int objType() {
            return OBJ_DPA_MEM;
        }

        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused {
            long size = get64(obj, MEM_SIZE);
            int id = unitOp(() -> unit.memCreate(uid, size));
            int dumem = umems.addDumem(unit.space(), unit.recordSpace(), unit.memAddress(id), size, "DPA_MEM " + id);
            set64(out, CTX + MEM_DADDR, unit.memAddress(id));
            MEM_DUMEM_ID.set(out, CTX, dumem);
            return add(new Obj(OBJ_DPA_MEM, uid, id, 0, 0, 0, dumem));
        }

        public void modify(int uid, int objId, MemorySegment obj) throws Refused {
            throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, SYND_DPA_BAD_PARAM, "DPA_MEM has nothing to modify");
        }

        public void query(int uid, int objId, MemorySegment out) throws Refused {
            Obj o = ref(uid, objId, OBJ_DPA_MEM, "DPA_MEM");
            set64(out, CTX + MEM_DADDR, unit.memAddress(objId));
            MEM_DUMEM_ID.set(out, CTX, o.dumem);
        }

        public void destroy(int uid, int objId) throws Refused {
            Obj o = ref(uid, objId, OBJ_DPA_MEM, "DPA_MEM");
            umems.checkDumemFree(o.dumem);
            unitOp(() -> {
                unit.memDestroy(objId);
                return null;
            });
            umems.removeDumem(o.dumem);
            objs.remove(objId);
        }
    }

    private final class Process implements GeneralObjectType {
        public int objType() {
            return OBJ_DPA_PROCESS;
        }

        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused {
            int mem = PROCESS_IMAGE_MEM.get(obj, 0);
            ref(uid, mem, OBJ_DPA_MEM, "image DPA_MEM");
            int pd = PROCESS_PD.get(obj, 0);
            int uar = PROCESS_UAR.get(obj, 0);
            long heap = get64(obj, PROCESS_HEAP_SIZE);
            int id = unitOp(() -> unit.processCreate(uid, pd, uar, mem, Integer.toUnsignedLong(PROCESS_IMAGE_LEN.get(obj, 0)), heap));
            int dumem = umems.addDumem(unit.space(), unit.recordSpace(), unit.heapBase(id), heap, "DPA_PROCESS " + id);
            set64(out, CTX + PROCESS_HEAP_BASE, unit.heapBase(id));
            PROCESS_DUMEM_ID.set(out, CTX, dumem);
            return add(new Obj(OBJ_DPA_PROCESS, uid, id, id, pd, uar, dumem));
        }

        public void modify(int uid, int objId, MemorySegment obj) throws Refused {
            throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, SYND_DPA_BAD_PARAM, "DPA_PROCESS has nothing to modify");
        }

        public void query(int uid, int objId, MemorySegment out) throws Refused {
            Obj o = ref(uid, objId, OBJ_DPA_PROCESS, "DPA_PROCESS");
            set64(out, CTX + PROCESS_HEAP_BASE, unit.heapBase(objId));
            PROCESS_PD.set(out, CTX, o.pd);
            PROCESS_UAR.set(out, CTX, o.uar);
            PROCESS_STATUS.set(out, CTX, unit.processStatus(objId));
            PROCESS_DUMEM_ID.set(out, CTX, o.dumem);
            set64(out, CTX + PROCESS_QUERY_HEAP_SIZE, unit.heapSize(objId));
        }

        public void destroy(int uid, int objId) throws Refused {
            Obj p = ref(uid, objId, OBJ_DPA_PROCESS, "DPA_PROCESS");
            if (objs.values().stream().anyMatch(o -> o.process == objId && o.type != OBJ_DPA_PROCESS)) {
                throw new Refused(Mlx5Cmd.STAT_RES_BUSY, SYND_DPA_IN_USE, "DPA_PROCESS " + objId
                        + " still has threads, outboxes or windows");
            }
            umems.checkDumemFree(p.dumem);
            unitOp(() -> {
                unit.processDestroy(objId);
                return null;
            });
            umems.removeDumem(p.dumem);
            objs.remove(objId);
        }
    }

    private final class Thread implements GeneralObjectType {
        public int objType() {
            return OBJ_DPA_THREAD;
        }

        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused {
            int pid = THREAD_PROCESS.get(obj, 0);
            ref(uid, pid, OBJ_DPA_PROCESS, "DPA_PROCESS");
            int kind = THREAD_AFFINITY_TYPE.get(obj, 0);
            if (kind > 2) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_DPA_BAD_PARAM, "affinity type " + kind);
            }
            Affinity a = new Affinity(Affinity.Kind.values()[kind], THREAD_AFFINITY_ID.get(obj, 0));
            int id = unitOp(() -> unit.threadCreate(pid, unit.entryName(pid, THREAD_ENTRY_INDEX.get(obj, 0)),
                    get64(obj, THREAD_ARG), get64(obj, THREAD_TLS), a, THREAD_CONTINUABLE.get(obj, 0) == 1));
            return add(new Obj(OBJ_DPA_THREAD, uid, id, pid, 0, 0));
        }

        public void modify(int uid, int objId, MemorySegment obj) throws Refused {
            ref(uid, objId, OBJ_DPA_THREAD, "DPA_THREAD");
            if ((THREAD_MODIFY_SELECT.get(obj, 0) & THREAD_SELECT_STATE) == 0) {
                return;
            }
            int state = THREAD_STATE.get(obj, 0);
            unitOp(() -> switch (state) {
                case THREAD_STATE_RUN -> {
                    unit.threadRun(objId);
                    yield null;
                }
                case THREAD_STATE_TRIGGER -> unit.trigger(objId);
                default -> throw new IllegalArgumentException("DPA_THREAD state " + state + " cannot be set");
            });
        }

        public void query(int uid, int objId, MemorySegment out) throws Refused {
            Obj o = ref(uid, objId, OBJ_DPA_THREAD, "DPA_THREAD");
            long[] st = unit.threadStats(objId);
            THREAD_PROCESS.set(out, CTX, o.process);
            THREAD_STATE.set(out, CTX, unit.threadState(objId).ordinal());
            THREAD_EU.set(out, CTX, st[0] < 0 ? 0xffff : (int) st[0]);
            THREAD_ACTIVATIONS.set(out, CTX, (int) st[1]);
            set64(out, CTX + THREAD_RPC_RESULT, unit.rpcResult(objId)); // after the state: the RTOS lock orders it after the activation
        }

        public void destroy(int uid, int objId) throws Refused {
            ref(uid, objId, OBJ_DPA_THREAD, "DPA_THREAD");
            unitOp(() -> {
                unit.threadDestroy(objId);
                return null;
            });
            objs.remove(objId);
        }
    }

    private final class Outbox implements GeneralObjectType {
        public int objType() {
            return OBJ_DPA_OUTBOX;
        }

        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused {
            int pid = OUTBOX_PROCESS.get(obj, 0);
            Obj p = ref(uid, pid, OBJ_DPA_PROCESS, "DPA_PROCESS");
            int id = unitOp(() -> unit.outboxCreate(pid));
            return add(new Obj(OBJ_DPA_OUTBOX, uid, id, pid, 0, p.uar));
        }

        public void modify(int uid, int objId, MemorySegment obj) throws Refused {
            throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, SYND_DPA_BAD_PARAM, "DPA_OUTBOX has nothing to modify");
        }

        public void query(int uid, int objId, MemorySegment out) throws Refused {
            Obj o = ref(uid, objId, OBJ_DPA_OUTBOX, "DPA_OUTBOX");
            OUTBOX_PROCESS.set(out, CTX, o.process);
            OUTBOX_UAR.set(out, CTX, o.uar);
        }

        public void destroy(int uid, int objId) throws Refused {
            ref(uid, objId, OBJ_DPA_OUTBOX, "DPA_OUTBOX");
            unitOp(() -> {
                unit.outboxDestroy(objId);
                return null;
            });
            objs.remove(objId);
        }
    }

    private final class Window implements GeneralObjectType {
        public int objType() {
            return OBJ_DPA_WINDOW;
        }

        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused {
            int pid = WINDOW_PROCESS.get(obj, 0);
            ref(uid, pid, OBJ_DPA_PROCESS, "DPA_PROCESS");
            int pd = WINDOW_PD.get(obj, 0);
            int id = unitOp(() -> unit.windowCreate(pid, pd));
            return add(new Obj(OBJ_DPA_WINDOW, uid, id, pid, pd, 0));
        }

        public void modify(int uid, int objId, MemorySegment obj) throws Refused {
            throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, SYND_DPA_BAD_PARAM, "DPA_WINDOW's mkey is chosen on the device");
        }

        public void query(int uid, int objId, MemorySegment out) throws Refused {
            Obj o = ref(uid, objId, OBJ_DPA_WINDOW, "DPA_WINDOW");
            WINDOW_PROCESS.set(out, CTX, o.process);
            WINDOW_PD.set(out, CTX, o.pd);
        }

        public void destroy(int uid, int objId) throws Refused {
            ref(uid, objId, OBJ_DPA_WINDOW, "DPA_WINDOW");
            unitOp(() -> {
                unit.windowDestroy(objId);
                return null;
            });
            objs.remove(objId);
        }
    }
}
