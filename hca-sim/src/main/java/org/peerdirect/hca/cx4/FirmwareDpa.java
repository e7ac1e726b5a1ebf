package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.util.List;

import org.peerdirect.hca.cx4.ifc.DpaObj;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.dpa.DpaConfig;
import org.peerdirect.hca.dpa.DpaNic;
import org.peerdirect.hca.dpa.DpaUnit;
import org.peerdirect.hca.dpa.LoaderPolicy;
import org.peerdirect.hca.dpa.WindowPort;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCq;

/**
 * A BlueField-3 firmware's DPA: the {@link DpaUnit} and its general objects ({@link DpaObjects},
 * registered with the dispatcher through delegating types), and the NIC side the unit asks for:
 * the outbox doorbells over the firmware's CQs and QPs ({@link DpaNic}), windows through the MPT
 * to the function's IOMMU domain ({@link WindowPort}, {@link HcaDevice#keyAccess}), CQs bound to
 * DPA threads ({@link Cqs.ApuThreads}), and process errors as {@code OBJECT_CHANGE} EQEs.
 *
 * <p>The unit (and its DPA memory) is made on the first DPA object, so a BlueField-3 that runs no
 * DPA code allocates none. A force teardown and the function's removal stop every EU first
 * ({@link #drop}: every process destroyed, its threads stopped), then the objects go.
 *
 * <p>Lock rules: {@link #unit} and {@link #objects} change on the firmware thread (commands,
 * teardown) or on removal after the firmware thread stopped; doorbells (the harts' threads) and
 * events (the engine's) read them through the volatile fields and reach only the self-guarding
 * queue tables.
 */
final class FirmwareDpa implements DpaNic, WindowPort, Cqs.ApuThreads, DpaUnit.ErrorEvents {

    private final Transport transport;
    private final Uctxs uctxs;
    private final Eqs eqs;
    private final GeneralObjects generalObjects;
    private final HcaDevice engine;
    private final Umems umems;
    private final FirmwarePages pages;
    /** (obj_type, obj_id) → the object's context in the firmware's pages (firmware thread only). */
    private final java.util.Map<Long, FirmwarePages.Slot> contexts = new java.util.HashMap<>();
    /**
     * The model's on-card DPA memory: 32 MiB, not the GBs of DPU memory a BlueField-3 has (the
     * memory is allocated and zeroed when the unit is made, and the command fuzzer makes one per
     * try); the capability {@code log_max_dpa_mem} 28 stays what the device reports, and a
     * DPA_MEM beyond what is free is refused ({@code LIM_ERR}). Otherwise {@link DpaConfig#bluefield3}.
     */
    static final long MODEL_DPA_MEM = 32L << 20;

    private volatile DpaConfig config = withMem(DpaConfig.bluefield3(), MODEL_DPA_MEM);
    private volatile LoaderPolicy policy = LoaderPolicy.isaOnly();
    private volatile DpaUnit unit;
    private volatile DpaObjects objects;
    private volatile java.util.Map<Integer, GeneralObjectType> types = java.util.Map.of();

    FirmwareDpa(Transport transport, Uctxs uctxs, Eqs eqs, GeneralObjects generalObjects, HcaDevice engine, Umems umems, FirmwarePages pages) {
        this.umems = umems;
        this.pages = pages;
        this.transport = transport;
        this.uctxs = uctxs;
        this.eqs = eqs;
        this.generalObjects = generalObjects;
        this.engine = engine;
        for (int t : new int[] {DpaObj.OBJ_DPA_MEM, DpaObj.OBJ_DPA_PROCESS, DpaObj.OBJ_DPA_THREAD, DpaObj.OBJ_DPA_OUTBOX, DpaObj.OBJ_DPA_WINDOW}) {
            generalObjects.add(new Delegate(t));
        }
        transport.cqs.apu = this;
    }

    private static DpaConfig withMem(DpaConfig c, long bytes) {
        return c.withMemBytes(bytes);
    }

    /** The configuration and loader policy of the next unit (tests, the model's configuration); before the first DPA object. */
    void configure(DpaConfig c, LoaderPolicy p) {
        if (unit != null) {
            throw new IllegalStateException("the DPA runs already: configure it before its first object");
        }
        config = c;
        policy = p;
    }

    /** The configuration the next unit gets. */
    DpaConfig config() {
        return config;
    }

    LoaderPolicy policy() {
        return policy;
    }

    /** The unit, made on first use (firmware thread). */
    DpaUnit unit() {
        DpaUnit u = unit;
        if (u == null) {
            u = new DpaUnit(config, this, this, this, policy);
            DpaObjects o = new DpaObjects(u, umems);
            types = o.types().stream().collect(java.util.stream.Collectors.toUnmodifiableMap(GeneralObjectType::objType, t -> t));
            objects = o;
            unit = u;
        }
        return u;
    }

    /** The unit if one was made, else null (tools, tests). */
    DpaUnit unitIfAny() {
        return unit;
    }

    /**
     * Force teardown and removal: every process is destroyed, which stops its EUs before its
     * objects and memory go, then the unit closes. The dispatcher forgets the objects itself.
     */
    void drop() {
        DpaUnit u = unit;
        contexts.clear(); // the teardown frees every firmware page's contexts (FirmwarePages.freeAll)
        if (u != null) {
            unit = null;
            objects = null;
            types = java.util.Map.of();
            u.close();
        }
    }

    /** What is left in the unit: empty after a clean teardown or with no unit. */
    List<String> leaks() {
        DpaUnit u = unit;
        return u == null ? List.of() : u.leaks();
    }

    /**
     * The bytes of firmware memory one DPA object's context takes (peerdirect model): a process
     * holds its loader state, heap map and EU bindings in a whole firmware page; a thread its
     * register file and scheduling state (512 B); memory, outbox and window their 64-byte context.
     * A BlueField-3 running DPA code so asks for more pages; they return when the objects go.
     */
    static int contextBytes(int objType) {
        return switch (objType) {
            case DpaObj.OBJ_DPA_PROCESS -> 4096;
            case DpaObj.OBJ_DPA_THREAD -> 512;
            default -> DpaObj.CONTEXT_SIZE;
        };
    }

    private static long key(int objType, int objId) {
        return (long) objType << 32 | objId & 0xffff_ffffL;
    }

    /** Contexts of live DPA objects in the firmware's pages (tests, tools). */
    int contexts() {
        return contexts.size();
    }

    /** The object's context in a command's output: after the 16-byte output header. */
    private static final int OUT_CTX = 0x10;

    /** A dispatcher type for one DPA object type, handing every command to the current unit's. */
    private final class Delegate implements GeneralObjectType {
        private final int objType;

        Delegate(int objType) {
            this.objType = objType;
        }

        private GeneralObjectType type() {
            unit();
            return types.get(objType);
        }

        public int objType() {
            return objType;
        }

        /**
         * The context goes into the firmware's pages first (a command short of pages is parked
         * before anything changed), then the unit makes the object; a refusal gives the pages back.
         */
        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused, CommandQueue.Deferred {
            lengths(obj, out, "CREATE");
            GeneralObjectType t = type();
            FirmwarePages.Slot ctx = pages.store(contextBytes(objType), obj, 0, DpaObj.CONTEXT_SIZE, String.format("a DPA object's context (type 0x%x)", objType));
            int id;
            try {
                id = t.create(uid, obj, out);
            } catch (Refused | RuntimeException e) {
                pages.free(ctx);
                throw e;
            }
            contexts.put(key(objType, id), ctx);
            return id;
        }

        public void modify(int uid, int objId, MemorySegment obj) throws Refused {
            lengths(obj, null, "MODIFY");
            type().modify(uid, objId, obj);
        }

        public void query(int uid, int objId, MemorySegment out) throws Refused {
            lengths(null, out, "QUERY");
            type().query(uid, objId, out);
        }

        /**
         * The DPA objects' contexts are {@link DpaObj#CONTEXT_SIZE} bytes after the 16-byte
         * headers, in and out: a shorter command is refused before the type reads a field (found
         * by the command fuzzer: a 1-byte context threw out of the firmware thread).
         */
        private void lengths(MemorySegment obj, MemorySegment out, String what) throws Refused {
            if (obj != null && obj.byteSize() < DpaObj.CONTEXT_SIZE) {
                throw new Refused(Mlx5Cmd.STAT_BAD_INP_LEN_ERR, Syndromes.SYND_SHORT_INPUT, String.format(
                        "%s_GENERAL_OBJECT of type 0x%x: the context needs %d bytes after the header, has %d", what, objType,
                        DpaObj.CONTEXT_SIZE, obj.byteSize()));
            }
            if (out != null && out.byteSize() < OUT_CTX + DpaObj.CONTEXT_SIZE) {
                throw new Refused(Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR, Syndromes.SYND_SHORT_OUTPUT, String.format(
                        "%s_GENERAL_OBJECT of type 0x%x: the output needs %d bytes, has %d", what, objType, OUT_CTX + DpaObj.CONTEXT_SIZE,
                        out.byteSize()));
            }
        }

        public void destroy(int uid, int objId) throws Refused {
            type().destroy(uid, objId);
            FirmwarePages.Slot ctx = contexts.remove(key(objType, objId));
            if (ctx != null) {
                pages.free(ctx);
            }
        }
    }

    // ---- CQs bound to DPA threads (firmware thread; event: the engine's) ----

    @Override
    public void bind(int cqn, int tid, int uid) throws Refused {
        Integer owner = generalObjects.owner(DpaObj.OBJ_DPA_THREAD, tid);
        DpaUnit u = unit;
        if (owner == null || u == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT,
                    "c_eqn_or_apu_element " + tid + " names no DPA thread");
        }
        if (uid != 0 && owner != uid) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID,
                    "DPA thread " + tid + " belongs to uid " + owner + ", not to uid " + uid + " of the command");
        }
        u.bindCq(cqn, tid);
    }

    @Override
    public void unbind(int cqn) {
        DpaUnit u = unit;
        if (u != null) {
            u.unbindCq(cqn);
        }
    }

    @Override
    public void event(int cqn, int tid) {
        DpaUnit u = unit;
        if (u != null) {
            u.cqEvent(cqn, tid);
        }
    }

    @Override
    public void processError(int process, int uid, int status, String crash) {
        generalObjects.objectChanged(DpaObj.OBJ_DPA_PROCESS, process);
    }

    // ---- DpaNic: the outbox doorbells (the harts' threads) ----

    @Override
    public int ownerUid(QueueKind kind, int number) {
        return switch (kind) {
            case CQ -> transport.cqs.cq(number) == null ? -1 : uctxs.owner(Uctxs.Kind.CQ, number);
            case SQ -> transport.qps.exists(number) ? uctxs.owner(Uctxs.Kind.QP, number) : -1;
            case EQ -> eqs.eq(number) == null ? -1 : 0; // EQs are the kernel's
        };
    }

    @Override
    public void cqArm(int cqn, int ci) {
        transport.cqs.arm(cqn, ci);
    }

    @Override
    public void sqDoorbell(int qn, int pi) {
        transport.qps.sqDoorbellPi(qn, pi);
    }

    @Override
    public void zeroCqe(int cqn) {
        transport.cqs.zeroCqe(cqn);
    }

    @Override
    public void eqUpdateCi(int eqn, int ci) {
        HwEq e = eqs.eq(eqn);
        if (e != null) {
            e.doorbell(ci & 0xff_ffff, false);
        }
    }

    @Override
    public CqState cqState(int cqn) {
        Cqs.MemCq c = transport.cqs.cq(cqn);
        if (c == null) {
            return null;
        }
        HwCq.ArmState a = c.hw.armState();
        return new CqState(a.armed(), a.eventsRaised(), c.hw.producerIndex(), c.consumerIndex());
    }

    // ---- WindowPort: through the MPT to the function's IOMMU domain ----

    @Override
    public Mkey lookup(int mkey) {
        HcaDevice.KeyInfo k = engine.keyInfo(mkey);
        return k == null ? null : new Mkey(k.pdn(), (k.access() & HcaDevice.PERM_LOCAL_READ) != 0,
                (k.access() & HcaDevice.PERM_LOCAL_WRITE) != 0, k.start(), k.length());
    }

    @Override
    public void read(int mkey, long va, MemorySegment dst, long dstOffset, long len) {
        engine.keyAccess(mkey, va, dst, dstOffset, len, false);
    }

    @Override
    public void write(int mkey, long va, MemorySegment src, long srcOffset, long len) {
        engine.keyAccess(mkey, va, src, srcOffset, len, true);
    }
}
