package org.peerdirect.hca.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** A fault budget: the faults apply to the next N frames only, then the link is clean. */
class FaultyLinkBudgetTest {

    /** The frames that got through, by their length (each test frame has its own). */
    private static final class Recording implements Link {
        final List<Integer> sent = new ArrayList<>();

        @Override
        public void start(Receiver r) {
        }

        @Override
        public boolean send(Frame f) {
            sent.add(f.len);
            return true;
        }

        @Override
        public String describe() {
            return "recording";
        }

        @Override
        public long lost() {
            return 0;
        }

        @Override
        public void close() {
        }
    }

    private static Frame frame(int len) {
        Frame f = new Frame();
        f.len = len;
        return f;
    }

    @Test
    void theFaultsStopAfterTheirBudget() {
        Recording r = new Recording();
        FaultyLink l = new FaultyLink(r, FaultyLink.Faults.NONE);
        l.setFaults(new FaultyLink.Faults(1, 0, 0, 0, 0, 5), 3);
        for (int i = 1; i <= 6; i++) {
            l.send(frame(i));
        }
        assertEquals(List.of(4, 5, 6), r.sent, "the first three dropped, the rest through");
        assertEquals(3, l.dropped.get());
        l.setFaults(new FaultyLink.Faults(1, 0, 0, 0, 0, 5));
        l.send(frame(7));
        assertEquals(List.of(4, 5, 6), r.sent, "without a budget the faults stay");
        assertThrows(IllegalArgumentException.class, () -> l.setFaults(FaultyLink.Faults.NONE, -1));
        l.close();
    }
}
