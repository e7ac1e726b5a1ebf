package org.peerdirect.hca.boards;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.junit.jupiter.api.Test;

/** The subnet's LID table: what the subnet manager assigns, and what a port leaving it takes along. */
class FabricTest {

    /** A port as the subnet sees it: the LID it was given. */
    static final class Port implements Fabric.Port {
        int lid;

        @Override
        public int lid() {
            return lid;
        }
    }

    static Port attach(Fabric f) {
        Port p = new Port();
        p.lid = f.attach(p);
        return p;
    }

    @Test
    void portsGetTheNextUnicastLidAndAreFoundByIt() {
        Fabric f = new Fabric();
        Port a = attach(f);
        Port b = attach(f);
        assertEquals(1, a.lid, "unicast LIDs start at 1");
        assertEquals(2, b.lid);
        assertSame(a, f.port(1));
        assertSame(b, f.port(2));
        assertNull(f.port(3), "not assigned");
        assertNull(f.port(0), "LID 0 is reserved");
        assertNull(f.port(-1));
        assertNull(f.port(Fabric.MAX_LID), "multicast range, not a port");
    }

    @Test
    void aDetachedPortIsUnreachableAndItsLidIsNotGivenAgain() {
        Fabric f = new Fabric();
        Port a = attach(f);
        f.detach(a);
        assertNull(f.port(a.lid));
        f.detach(a); // twice: nothing left to take
        Port b = attach(f);
        assertEquals(2, b.lid, "a packet still addressed to the old LID must not reach a new port");
    }

    @Test
    void aPortDetachesOnlyItsOwnLid() {
        Fabric f = new Fabric();
        Port a = attach(f);
        Port stranger = new Port();
        stranger.lid = a.lid; // claims a's LID without the subnet manager
        f.detach(stranger);
        assertSame(a, f.port(a.lid));
    }
}
