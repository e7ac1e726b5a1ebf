package org.peerdirect.kernel.pci;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class BoundDevicesTest {

    private record Dev(String name, int index) {
    }

    /** Bound in any order, listed by index; an unbind leaves the others in place; a snapshot does not move under later binds. */
    @Test
    void devicesAreListedByIndexWhateverTheBindOrder() {
        BoundDevices<Dev> d = new BoundDevices<>(Dev::index);
        assertTrue(d.isEmpty());
        Dev two = new Dev("nvme2", 2);
        Dev zero = new Dev("nvme0", 0);
        Dev one = new Dev("nvme1", 1);
        d.add(two);
        d.add(zero);
        List<Dev> before = d.all();
        d.add(one);
        assertEquals(List.of(zero, one, two), d.all());
        assertEquals(List.of(zero, two), before, "a snapshot stays as it was");
        d.remove(one);
        d.remove(new Dev("never bound", 7));
        assertEquals(List.of(zero, two), d.all());
        assertEquals(2, d.size());
    }
}
