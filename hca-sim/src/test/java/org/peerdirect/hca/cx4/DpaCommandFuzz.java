package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.SplittableRandom;

import org.peerdirect.hca.cx4.CommandFuzzTest.Rig;
import org.peerdirect.hca.cx4.CommandFuzzTest.Spec;
import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/**
 * The DPA general-object commands of {@link CommandFuzzTest} (on a BlueField-3 try): mostly
 * well-formed contexts ("peerdirect PRM extension v1") whose fields are small, random or the ids
 * of DPA objects the try made (any uid), sometimes a short context or output. The fuzz's oracle
 * applies: each ends in a status with a syndrome, never an exception out of the firmware thread,
 * and the try's audit is clean (the teardown stops every EU and drops every DPA object).
 * Processes are mostly refused (a DPA_MEM holds no image unless one was written), which is a
 * status too.
 */
final class DpaCommandFuzz {

    static final int[] TYPES = {OBJ_DPA_MEM, OBJ_DPA_PROCESS, OBJ_DPA_THREAD, OBJ_DPA_OUTBOX, OBJ_DPA_WINDOW};

    private DpaCommandFuzz() {
    }

    /** A live object's id of {@code type} the try made, else a small number. */
    private static int some(Rig rig, int type, SplittableRandom r) {
        List<int[]> of = rig.dpaObjs.stream().filter(o -> o[0] == type).toList();
        return of.isEmpty() || r.nextInt(5) == 0 ? r.nextInt(16) : of.get(r.nextInt(of.size()))[1];
    }

    /**
     * One general-object command ({@code opcode}, or a CREATE a third of the time: objects to
     * name) on a DPA type (DPA_MEM half of the creates: processes need one).
     */
    static Spec command(Rig rig, int slot, int opcodeAsked, SplittableRandom r) {
        int opcode = r.nextInt(3) == 0 ? Mlx5Cmd.CREATE_GENERAL_OBJECT : opcodeAsked;
        int type = opcode == Mlx5Cmd.CREATE_GENERAL_OBJECT && r.nextBoolean() ? OBJ_DPA_MEM : TYPES[r.nextInt(TYPES.length)];
        int full = Devx.GENERAL_OBJ_HDR + CONTEXT_SIZE;
        int inlen = r.nextInt(16) == 0 ? Devx.GENERAL_OBJ_HDR + r.nextInt(CONTEXT_SIZE) : full;
        int outlen = r.nextInt(16) == 0 ? 16 + r.nextInt(CONTEXT_SIZE) : 16 + CONTEXT_SIZE;
        Spec s = new Spec(slot, opcode, type, inlen, outlen);
        int id = opcode == Mlx5Cmd.CREATE_GENERAL_OBJECT ? 0 : some(rig, type, r);
        s.inSeg().set(BE32, Devx.OBJ_ID, id);
        if (inlen == full) {
            fill(rig, type, s.inSeg().asSlice(Devx.GENERAL_OBJ_HDR), r);
        }
        if (opcode == Mlx5Cmd.CREATE_GENERAL_OBJECT) {
            s.onOk = () -> {
                rig.dpaObjs.add(new int[] {type, rig.entryOut(slot).get(BE32, Devx.OBJ_ID)});
                rig.stats.dpaObjects.increment();
            };
        } else if (opcode == Mlx5Cmd.DESTROY_GENERAL_OBJECT) {
            s.onOk = () -> rig.dpaObjs.removeIf(o -> o[0] == type && o[1] == id);
        }
        return s;
    }

    private static void fill(Rig rig, int type, MemorySegment c, SplittableRandom r) {
        switch (type) {
            case OBJ_DPA_MEM -> set64(c, MEM_SIZE, r.nextInt(10) == 0 ? r.nextLong() : 64 + r.nextInt(1 << 16));
            case OBJ_DPA_PROCESS -> {
                PROCESS_IMAGE_MEM.set(c, 0, some(rig, OBJ_DPA_MEM, r));
                PROCESS_IMAGE_LEN.set(c, 0, r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(4096));
                set64(c, PROCESS_HEAP_SIZE, r.nextInt(8) == 0 ? r.nextLong() : r.nextInt(1 << 16));
                PROCESS_PD.set(c, 0, rig.pds.isEmpty() ? r.nextInt(8) : rig.pds.get(r.nextInt(rig.pds.size())));
                PROCESS_UAR.set(c, 0, rig.uars.isEmpty() ? r.nextInt(8) : rig.uars.get(r.nextInt(rig.uars.size())));
            }
            case OBJ_DPA_THREAD -> {
                THREAD_PROCESS.set(c, 0, some(rig, OBJ_DPA_PROCESS, r));
                THREAD_ENTRY_INDEX.set(c, 0, r.nextInt(4));
                THREAD_AFFINITY_TYPE.set(c, 0, r.nextInt(4));
                THREAD_AFFINITY_ID.set(c, 0, r.nextInt(300));
                set64(c, THREAD_ARG, r.nextLong());
                THREAD_MODIFY_SELECT.set(c, 0, r.nextInt(3));
                THREAD_STATE.set(c, 0, r.nextInt(4));
            }
            default -> { // outbox, window: the process (the same offset), a PD
                OUTBOX_PROCESS.set(c, 0, some(rig, OBJ_DPA_PROCESS, r));
                WINDOW_PD.set(c, 0, rig.pds.isEmpty() ? r.nextInt(8) : rig.pds.get(r.nextInt(rig.pds.size())));
            }
        }
    }
}
