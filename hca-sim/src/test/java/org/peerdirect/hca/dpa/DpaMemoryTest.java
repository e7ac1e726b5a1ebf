package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;

/** The DPA memory allocator: regions never overlap, every byte comes back, exhaustion is refused. */
class DpaMemoryTest {

    @Test
    void randomAllocationsNeverOverlapAndAllComeBack() {
        try (DpaMemory m = new DpaMemory(1 << 20)) {
            Random r = new Random(7);
            List<DpaMemory.Region> live = new ArrayList<>();
            for (int i = 0; i < 5_000; i++) {
                if (live.isEmpty() || r.nextInt(3) > 0) {
                    try {
                        DpaMemory.Region n = m.alloc(1 + r.nextInt(16 << 10), 1);
                        for (DpaMemory.Region o : live) {
                            assertTrue(n.base() + n.size() <= o.base() || o.base() + o.size() <= n.base(),
                                    n + " overlaps " + o);
                        }
                        assertTrue(n.base() >= DpaMemory.ALIGN && n.base() + n.size() <= m.size() && n.base() % 64 == 0, n.toString());
                        live.add(n);
                    } catch (DpaMemoryExhausted e) {
                        m.free(live.remove(r.nextInt(live.size())));
                    }
                } else {
                    m.free(live.remove(r.nextInt(live.size())));
                }
            }
            live.forEach(m::free);
            assertEquals(0, m.allocated());
            DpaMemory.Region all = m.alloc(m.size() - DpaMemory.ALIGN, 1);
            assertEquals(DpaMemory.ALIGN, all.base(), "the free ranges coalesced back into one");
            m.free(all);
            assertThrows(DpaMemoryExhausted.class, () -> m.alloc(m.size(), 1));
            assertThrows(IllegalArgumentException.class, () -> m.alloc(0, 1));
            assertThrows(IllegalStateException.class, () -> m.free(all), "a double free");
        }
    }
}
