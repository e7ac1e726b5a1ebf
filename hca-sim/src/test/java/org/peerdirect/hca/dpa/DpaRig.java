package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.AfterEach;

/**
 * The rig of the DPA unit tests: a DPA unit on a fake NIC, images loaded the way the firmware
 * loads them (written into a DPA_MEM object by DMA, then a process created over it). Every test
 * ends with the unit closed and nothing left: no activation, process, DPA memory or busy EU.
 */
abstract class DpaRig {

    static final int UID = 7;
    final FakeNic nic = new FakeNic();
    final List<String> errors = new CopyOnWriteArrayList<>();
    WindowPort windowPort = new WindowPort() {
        @Override
        public Mkey lookup(int mkey) {
            return null;
        }

        @Override
        public void read(int mkey, long va, MemorySegment dst, long dstOffset, long len) {
            throw new IllegalStateException("no window memory in this test");
        }

        @Override
        public void write(int mkey, long va, MemorySegment src, long srcOffset, long len) {
            throw new IllegalStateException("no window memory in this test");
        }
    };
    DpaUnit unit;

    DpaUnit start(DpaConfig c) {
        unit = new DpaUnit(c, nic, windowPort, (p, u, s, crash) -> errors.add(p + ":" + Integer.toHexString(s) + ":" + crash),
                LoaderPolicy.isaOnly());
        nic.unit = unit;
        return unit;
    }

    /** Writes the image into a DPA_MEM of {@code uid}, creates a process over it, frees the DPA_MEM. */
    int load(int uid, byte[] image, long heap) throws ImageRejected {
        int mem = unit.memCreate(uid, image.length);
        try {
            unit.nicWrite(unit.memAddress(mem), MemorySegment.ofArray(image), 0, image.length);
            return unit.processCreate(uid, 1, 1, mem, image.length, heap);
        } finally {
            unit.memDestroy(mem);
        }
    }

    long peek(long daddr) {
        return unit.memory.seg.get(DpaMemory.LONG, daddr);
    }

    void poke(long daddr, long v) {
        unit.memory.seg.set(DpaMemory.LONG, daddr, v);
    }

    void settle() {
        assertEquals(true, unit.awaitIdle(), "the DPA settles");
    }

    @AfterEach
    void teardown() {
        if (unit != null) {
            unit.close();
            assertEquals(List.of(), unit.leaks(), "nothing left on the DPA");
        }
    }
}
