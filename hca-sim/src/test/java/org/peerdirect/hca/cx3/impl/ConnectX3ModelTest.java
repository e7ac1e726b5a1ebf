package org.peerdirect.hca.cx3.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * The ConnectX-3 models under Configuration Admin changes: {@code devices} plugs in or removes
 * only the difference, a re-delivery of the same values touches nothing (before, a rejected value
 * put back by the guard re-created every board), a change of {@code ports} re-creates them all.
 */
class ConnectX3ModelTest {

    @TempDir
    Path tmp;

    static ConnectX3Model.Config config(int devices, int ports) {
        return new ConnectX3Model.Config() {
            @Override
            public int devices() {
                return devices;
            }

            @Override
            public int ports() {
                return ports;
            }

            @Override
            public Class<? extends Annotation> annotationType() {
                return ConnectX3Model.Config.class;
            }
        };
    }

    @Test
    void devicesChangeByTheDifferenceAndPortsRecreateEveryBoard() {
        Mm mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        Iommu iommu = new Iommu(mm);
        StandalonePciBus bus = new StandalonePciBus(iommu);
        ConnectX3Model model = new ConnectX3Model(bus, new Fabric(), config(2, 1));
        List<PciFunction> two = bus.functions();
        assertEquals(2, two.size());
        Object board0 = model.boards().get(two.get(0).bdf());

        model.modified(config(2, 1));
        assertEquals(two, bus.functions(), "an unchanged delivery: the same functions");
        assertSame(board0, model.boards().get(two.get(0).bdf()), "and the same boards");

        model.modified(config(3, 1));
        assertEquals(3, bus.functions().size());
        assertEquals(two, bus.functions().subList(0, 2), "the two stayed");

        model.modified(config(1, 1));
        assertEquals(List.of(two.get(0)), bus.functions(), "the newest two removed");
        assertFalse(two.get(1).present());

        model.modified(config(1, 2));
        assertFalse(two.get(0).present(), "a change of ports re-creates the board");
        assertEquals(1, bus.functions().size());
        assertNotSame(two.get(0), bus.functions().get(0));

        model.deactivate();
        model.deactivate(); // idempotent
        assertEquals(0, bus.functions().size());
        bus.close();
        org.junit.jupiter.api.Assertions.assertEquals(java.util.List.of(), bus.warnings(), "the bus warned");
        assertTrue(iommu.audit().clean(), "no violation, no mapping left: " + iommu.audit());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
    }
}
