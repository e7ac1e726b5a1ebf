package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.dpa.DpaConfig;
import org.peerdirect.hca.dpa.DpaNic;
import org.peerdirect.hca.dpa.DpaUnit;
import org.peerdirect.hca.dpa.ImagePackager;
import org.peerdirect.hca.dpa.LoaderPolicy;
import org.peerdirect.hca.dpa.WindowPort;
import org.peerdirect.hca.dpa.progs.RtosProgs;

/**
 * The DPA general objects: create, modify, query and destroy in the "peerdirect PRM extension v1"
 * layouts, the refusals with their statuses and syndromes, and a teardown in reverse order.
 */
class DpaObjectsTest extends DpaObjectsRig {

    @Test
    void aThreadRunsThroughTheObjectsAndEverythingGoesInReverseOrder() throws Exception {
        byte[] img = image();
        int mem = mem(UID, img);
        int pid = process(UID, mem, img.length, 4096);
        MemorySegment q = out();
        types.get(OBJ_DPA_PROCESS).query(UID, pid, q);
        long heap = get64(q, 0x10 + PROCESS_HEAP_BASE);
        assertEquals(5, PROCESS_PD.get(q, 0x10));
        assertEquals(0, PROCESS_STATUS.get(q, 0x10));
        int tid = thread(UID, pid, 0, 1, 3, heap);
        int ob = types.get(OBJ_DPA_OUTBOX).create(UID, withProcess(OUTBOX_PROCESS, pid), out());
        int win = types.get(OBJ_DPA_WINDOW).create(UID, withProcess(WINDOW_PROCESS, pid), out());
        state(tid, THREAD_STATE_RUN);
        state(tid, THREAD_STATE_TRIGGER);
        assertTrue(unit.awaitIdle());
        types.get(OBJ_DPA_THREAD).query(UID, tid, q);
        assertEquals(1, THREAD_ACTIVATIONS.get(q, 0x10));
        assertEquals(3, THREAD_STATE.get(q, 0x10), "WAITING");
        assertEquals(0xffff, THREAD_EU.get(q, 0x10));
        types.get(OBJ_DPA_OUTBOX).query(UID, ob, q);
        assertEquals(9, OUTBOX_UAR.get(q, 0x10), "the process's UAR");
        Refused busy = assertThrows(Refused.class, () -> types.get(OBJ_DPA_PROCESS).destroy(UID, pid));
        assertEquals(Mlx5Cmd.STAT_RES_BUSY, busy.status);
        types.get(OBJ_DPA_THREAD).destroy(UID, tid);
        types.get(OBJ_DPA_WINDOW).destroy(UID, win);
        types.get(OBJ_DPA_OUTBOX).destroy(UID, ob);
        types.get(OBJ_DPA_PROCESS).destroy(UID, pid);
        types.get(OBJ_DPA_MEM).destroy(UID, mem);
        assertEquals(List.of(), unit.leaks());
    }

    @Test
    void badInputGetsItsStatusAndSyndrome() throws Exception {
        byte[] img = image();
        int mem = mem(UID, img);
        Refused other = assertThrows(Refused.class, () -> process(UID + 1, mem, img.length, 4096));
        assertEquals(DpaObjects.SYND_DPA_OTHER_UID, other.syndrome);
        byte[] bad = img.clone();
        bad[1] = 'X';
        int badMem = mem(UID, bad);
        Refused image = assertThrows(Refused.class, () -> process(UID, badMem, bad.length, 4096));
        assertEquals(Mlx5Cmd.STAT_BAD_PARAM_ERR, image.status);
        assertEquals(DpaObjects.SYND_DPA_IMAGE, image.syndrome);
        assertTrue(image.getMessage().contains("rule malformed-image"), image.getMessage());
        Refused lim = assertThrows(Refused.class, () -> process(UID, mem, img.length, 1L << 30));
        assertEquals(Mlx5Cmd.STAT_LIM_ERR, lim.status);
        int pid = process(UID, mem, img.length, 4096);
        Refused eu = assertThrows(Refused.class, () -> thread(UID, pid, 0, 1, 9, 0));
        assertEquals(DpaObjects.SYND_DPA_BAD_PARAM, eu.syndrome);
        assertTrue(eu.getMessage().contains("EU 9 is outside the partition"), eu.getMessage());
        assertEquals(DpaObjects.SYND_DPA_BAD_PARAM, assertThrows(Refused.class, () -> thread(UID, pid, 7, 0, 0, 0)).syndrome,
                "an unknown entry");
        assertEquals(DpaObjects.SYND_DPA_OTHER_UID, assertThrows(Refused.class, () -> thread(UID + 1, pid, 0, 0, 0, 0)).syndrome);
        assertEquals(DpaObjects.SYND_DPA_NO_SUCH, assertThrows(Refused.class, () -> thread(UID, mem, 0, 0, 0, 0)).syndrome,
                "a DPA_MEM is no process");
        types.get(OBJ_DPA_PROCESS).destroy(UID, pid);
        types.get(OBJ_DPA_MEM).destroy(UID, mem);
        types.get(OBJ_DPA_MEM).destroy(UID, badMem);
    }
}
