package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.peerdirect.hca.dpa.DpaConfig;
import org.peerdirect.hca.dpa.DpaNic;
import org.peerdirect.hca.dpa.DpaUnit;
import org.peerdirect.hca.dpa.ImagePackager;
import org.peerdirect.hca.dpa.LoaderPolicy;
import org.peerdirect.hca.dpa.WindowPort;
import org.peerdirect.hca.dpa.progs.RtosProgs;

/**
 * The rig of the DPA general-object tests: a DPA unit and its five object types, called directly
 * as the general-object dispatcher will call them (they are not registered in Firmware yet); every
 * test ends with the unit closed and nothing left.
 */
abstract class DpaObjectsRig {

    static final int UID = 3;
    DpaUnit unit;
    Map<Integer, GeneralObjectType> types;
    final Arena arena = Arena.ofConfined();

    @BeforeEach
    void up() {
        DpaNic nic = new DpaNic() {
            public int ownerUid(QueueKind kind, int number) {
                return -1;
            }

            public void cqArm(int cqn, int ci) {
            }

            public void sqDoorbell(int qn, int pi) {
            }

            public void zeroCqe(int cqn) {
            }

            public void eqUpdateCi(int eqn, int ci) {
            }

            public CqState cqState(int cqn) {
                return null;
            }
        };
        WindowPort none = new WindowPort() {
            public Mkey lookup(int mkey) {
                return null;
            }

            public void read(int mkey, long va, MemorySegment dst, long off, long len) {
                throw new IllegalStateException("no windows here");
            }

            public void write(int mkey, long va, MemorySegment src, long off, long len) {
                throw new IllegalStateException("no windows here");
            }
        };
        unit = new DpaUnit(DpaConfig.test(4, 1), nic, none, (p, u, s, c) -> { }, LoaderPolicy.isaOnly());
        Caps caps = new Caps(true, true, 16);
        types = new DpaObjects(unit, new Umems(null, caps, new Uctxs(caps))).types().stream().collect(Collectors.toMap(GeneralObjectType::objType, t -> t));
    }

    @AfterEach
    void down() {
        unit.close();
        assertEquals(List.of(), unit.leaks());
        arena.close();
    }

    MemorySegment ctx() {
        return arena.allocate(CONTEXT_SIZE);
    }

    MemorySegment out() {
        return arena.allocate(0x10 + CONTEXT_SIZE);
    }

    int mem(int uid, byte[] image) throws Refused, CommandQueue.Deferred {
        MemorySegment c = ctx();
        set64(c, MEM_SIZE, image.length);
        MemorySegment o = out();
        int id = types.get(OBJ_DPA_MEM).create(uid, c, o);
        unit.nicWrite(get64(o, 0x10 + MEM_DADDR), MemorySegment.ofArray(image), 0, image.length);
        return id;
    }

    int process(int uid, int mem, int len, long heap) throws Refused, CommandQueue.Deferred {
        MemorySegment c = ctx();
        PROCESS_IMAGE_MEM.set(c, 0, mem);
        PROCESS_IMAGE_LEN.set(c, 0, len);
        set64(c, PROCESS_HEAP_SIZE, heap);
        PROCESS_PD.set(c, 0, 5);
        PROCESS_UAR.set(c, 0, 9);
        return types.get(OBJ_DPA_PROCESS).create(uid, c, out());
    }

    int thread(int uid, int pid, int entry, int affinityType, int affinityId, long arg) throws Refused, CommandQueue.Deferred {
        MemorySegment c = ctx();
        THREAD_PROCESS.set(c, 0, pid);
        THREAD_ENTRY_INDEX.set(c, 0, entry);
        THREAD_AFFINITY_TYPE.set(c, 0, affinityType);
        THREAD_AFFINITY_ID.set(c, 0, affinityId);
        set64(c, THREAD_ARG, arg);
        return types.get(OBJ_DPA_THREAD).create(uid, c, out());
    }

    void state(int tid, int state) throws Refused {
        MemorySegment c = ctx();
        THREAD_MODIFY_SELECT.set(c, 0, THREAD_SELECT_STATE);
        THREAD_STATE.set(c, 0, state);
        types.get(OBJ_DPA_THREAD).modify(UID, tid, c);
    }

    static byte[] image() {
        return new ImagePackager().add(RtosProgs.class).global("count", RtosProgs.class, "count").pack();
    }

    MemorySegment withProcess(org.peerdirect.hca.cx4.ifc.IfcField f, int pid) {
        MemorySegment c = ctx();
        f.set(c, 0, pid);
        return c;
    }
}
