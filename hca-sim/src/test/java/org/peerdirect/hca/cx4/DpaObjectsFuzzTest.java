package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/**
 * Random DPA general-object commands (fields, ids and uids mostly random, sometimes naming live
 * objects): every failure is a command status with a syndrome, never another exception or a hang,
 * and after destroying what was created the unit holds nothing. {@code -Ddpa.fuzz.steps=N} runs
 * longer (default 3000).
 */
class DpaObjectsFuzzTest extends DpaObjectsRig {

    static final int[] TYPES = {OBJ_DPA_MEM, OBJ_DPA_PROCESS, OBJ_DPA_THREAD, OBJ_DPA_OUTBOX, OBJ_DPA_WINDOW};

    @Test
    void randomCommandsGetStatusesAndLeaveNothing() throws Exception {
        Random r = new Random(Long.getLong("dpa.fuzz.seed", 42));
        int steps = Integer.getInteger("dpa.fuzz.steps", 3000);
        byte[] img = image();
        List<int[]> live = new ArrayList<>(); // {type, id, uid}
        int good = mem(UID, img);
        live.add(new int[] {OBJ_DPA_MEM, good, UID});
        int refused = 0;
        int[] created = new int[0x40];
        for (int i = 0; i < steps; i++) {
            int type = TYPES[r.nextInt(TYPES.length)];
            int uid = r.nextInt(8) == 0 ? UID + 1 : UID;
            MemorySegment c = ctx();
            for (int b = 0; b < CONTEXT_SIZE; b += 4) {
                c.set(org.peerdirect.hca.cx4.ifc.CmdEntry.BE32, b, r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(8));
            }
            List<int[]> ofType = live.stream().filter(o -> o[0] == type).toList();
            int some = r.nextInt(4) == 0 ? r.nextInt(64)
                    : r.nextBoolean() && !ofType.isEmpty() ? ofType.get(r.nextInt(ofType.size()))[1]
                    : live.get(r.nextInt(live.size()))[1];
            if (some == good) {
                some = r.nextInt(64); // the image stays, so processes keep being made
            }
            int target = some;
            if (type == OBJ_DPA_PROCESS && r.nextBoolean()) {
                PROCESS_IMAGE_MEM.set(c, 0, good);
                PROCESS_IMAGE_LEN.set(c, 0, img.length);
                set64(c, PROCESS_HEAP_SIZE, 64 + r.nextInt(8192));
            } else if (type != OBJ_DPA_MEM && type != OBJ_DPA_PROCESS) {
                // the process field of thread, outbox and window: mostly a live process
                List<int[]> ps = live.stream().filter(o -> o[0] == OBJ_DPA_PROCESS).toList();
                THREAD_PROCESS.set(c, 0, ps.isEmpty() || r.nextInt(4) == 0 ? some : ps.get(r.nextInt(ps.size()))[1]);
                if (r.nextBoolean()) { // a plausible thread: entry 0, no affinity, no TLS, any argument
                    THREAD_ENTRY_INDEX.set(c, 0, 0);
                    THREAD_AFFINITY_TYPE.set(c, 0, 0);
                    set64(c, THREAD_TLS, 0);
                }
            } else if (type == OBJ_DPA_MEM) {
                set64(c, MEM_SIZE, r.nextInt(4) == 0 ? r.nextLong() : r.nextInt(1 << 12));
            }
            GeneralObjectType t = types.get(type);
            try {
                switch (r.nextInt(4)) {
                    case 0 -> {
                        live.add(new int[] {type, t.create(uid, c, out()), uid});
                        created[type]++;
                    }
                    case 1 -> t.modify(uid, target, c);
                    case 2 -> t.query(uid, target, out());
                    default -> {
                        t.destroy(uid, target);
                        live.removeIf(o -> o[1] == target);
                    }
                }
            } catch (Refused e) {
                refused++;
                assertTrue(e.status != Mlx5Cmd.STAT_OK && e.syndrome != 0 && e.getMessage() != null, e.toString());
            }
            unit.awaitIdle();
        }
        String summary = String.format("%d steps: %d refused; created %d DPA_MEM, %d processes, %d threads, %d outboxes,"
                + " %d windows", steps, refused, created[OBJ_DPA_MEM], created[OBJ_DPA_PROCESS], created[OBJ_DPA_THREAD],
                created[OBJ_DPA_OUTBOX], created[OBJ_DPA_WINDOW]);
        System.out.println("DPA object fuzz: " + summary);
        assertTrue(refused > steps / 4 && created[OBJ_DPA_PROCESS] > 0 && created[OBJ_DPA_THREAD] > 0, summary);
        for (int type : new int[] {OBJ_DPA_THREAD, OBJ_DPA_WINDOW, OBJ_DPA_OUTBOX, OBJ_DPA_PROCESS, OBJ_DPA_MEM}) {
            for (int[] o : List.copyOf(live)) {
                if (o[0] == type) {
                    types.get(type).destroy(o[2], o[1]);
                    live.remove(o);
                }
            }
        }
        assertEquals(List.of(), unit.leaks());
    }
}
