package org.peerdirect.ib.core.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;
import org.peerdirect.ib.core.verbs.IbvPortAttr;

/** The port attributes as core/sysfs.c prints them, which node_exporter's infiniband collector parses. */
class IbSysfsTest {

    static IbvPortAttr port(int state, int width, int speed, int phys) {
        return new IbvPortAttr(state, 5, 5, 128, 0, 1L << 30, 128, 1, 1, 0, 8, 0, width, speed, phys, IbvPortAttr.LINK_LAYER_INFINIBAND);
    }

    @Test
    void stateAndPhysStateAreIdColonName() {
        assertEquals("4: ACTIVE", IbSysfs.stateShow(IbvPortAttr.PORT_ACTIVE));
        assertEquals("1: DOWN", IbSysfs.stateShow(IbvPortAttr.PORT_DOWN));
        assertEquals("5: LinkUp", IbSysfs.physStateShow(5));
        assertEquals("3: Disabled", IbSysfs.physStateShow(3));
        assertEquals("9: <unknown>", IbSysfs.physStateShow(9));
    }

    @Test
    void rateIsLanesTimesLaneSpeed() {
        assertEquals("100 Gb/sec (4X EDR)", IbSysfs.rateShow(port(4, 2, 32, 5)));
        assertEquals("56 Gb/sec (4X FDR)", IbSysfs.rateShow(port(4, 2, 16, 5)));
        assertEquals("10 Gb/sec (4X)", IbSysfs.rateShow(port(4, 2, 1, 5)));
        assertEquals("2.5 Gb/sec (1X)", IbSysfs.rateShow(port(4, 1, 1, 5)));
        assertEquals("200 Gb/sec (4X HDR)", IbSysfs.rateShow(port(4, 2, 64, 5)));
    }
}
