package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * Configuration Admin changes reach the ConnectX-4+ models as {@code @Modified}: only the
 * difference is plugged in or removed, the functions already on the bus stay (a driver bound to
 * them, its users and their traffic would live on), and a delivery that changes nothing (the
 * guard putting back a rejected value) touches nothing. Before, every delivery re-created every
 * function: a rejected value was a hot-unplug of all of them.
 */
class ConnectX4ModelTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;

    @AfterEach
    void down() {
        bus.close();
        assertTrue(iommu.audit().clean(), "no violation, no mapping left: " + iommu.audit());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
        assertEquals(List.of(), bus.warnings(), "no BAR write handler threw");
    }

    static ConnectX4Model.Config config(int cx4, int cx6dx) {
        return config(cx4, cx6dx, 0);
    }

    static ConnectX4Model.Config config(int cx4, int cx6dx, int bf3) {
        return new ConnectX4Model.Config() {
            @Override
            public int bluefield3() {
                return bf3;
            }

            @Override
            public int connectx4() {
                return cx4;
            }

            @Override
            public int connectx6dx() {
                return cx6dx;
            }

            @Override
            public Class<? extends Annotation> annotationType() {
                return ConnectX4Model.Config.class;
            }
        };
    }

    /** The bus's functions by device id, in bus order. */
    List<PciFunction> of(int deviceId) {
        List<PciFunction> l = new ArrayList<>();
        for (PciFunction f : bus.functions()) {
            if (f.deviceId() == deviceId) {
                l.add(f);
            }
        }
        return l;
    }

    @Test
    void aChangePlugsOnlyTheDifferenceAndAnUnchangedDeliveryTouchesNothing() {
        mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        ConnectX4Model model = new ConnectX4Model(bus, new Fabric(), config(1, 1));
        List<PciFunction> cx4 = of(ConnectX4Device.DEVICE_CONNECTX4);
        List<PciFunction> cx6 = of(ConnectX4Device.DEVICE_CONNECTX6DX);
        assertEquals(1, cx4.size());
        assertEquals(1, cx6.size());
        ConnectX4Device first = model.devices().get(cx4.get(0).bdf());

        model.modified(config(1, 1)); // a re-delivery of the same values
        assertEquals(List.of(cx4.get(0)), of(ConnectX4Device.DEVICE_CONNECTX4), "the same function, not a new one");
        assertSame(first, model.devices().get(cx4.get(0).bdf()), "the same model");
        assertTrue(cx4.get(0).present(), "never unplugged");

        model.modified(config(3, 1));
        List<PciFunction> more = of(ConnectX4Device.DEVICE_CONNECTX4);
        assertEquals(3, more.size(), "two more ConnectX-4");
        assertSame(cx4.get(0), more.get(0), "the first one stayed");
        assertEquals(cx6, of(ConnectX4Device.DEVICE_CONNECTX6DX), "the ConnectX-6 Dx stayed");

        model.modified(config(1, 0));
        assertEquals(List.of(cx4.get(0)), of(ConnectX4Device.DEVICE_CONNECTX4), "the newest two removed, the first kept");
        assertFalse(more.get(1).present() || more.get(2).present(), "unplugged");
        assertFalse(cx6.get(0).present(), "unplugged");
        assertEquals(0, of(ConnectX4Device.DEVICE_CONNECTX6DX).size());

        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> model.modified(config(9, 0)));
        assertTrue(bad.getMessage().contains("0..8"), bad.getMessage());
        assertEquals(List.of(cx4.get(0)), of(ConnectX4Device.DEVICE_CONNECTX4), "a refused value changes nothing");

        model.modified(config(1, 0, 2));
        List<PciFunction> bf3 = of(ConnectX4Device.DEVICE_BLUEFIELD3);
        assertEquals(2, bf3.size(), "two BlueField-3 plugged in beside the ConnectX-4");
        assertEquals(0x020000, bf3.get(0).classCode(), "an Ethernet controller");
        assertEquals(List.of(cx4.get(0)), of(ConnectX4Device.DEVICE_CONNECTX4), "the ConnectX-4 stayed");
        bad = assertThrows(IllegalArgumentException.class, () -> model.modified(config(1, 0, 9)));
        assertTrue(bad.getMessage().contains("bluefield3"), bad.getMessage());
        model.modified(config(1, 0, 1));
        assertEquals(List.of(bf3.get(0)), of(ConnectX4Device.DEVICE_BLUEFIELD3), "the newest BlueField-3 removed");
        assertFalse(bf3.get(1).present());

        model.deactivate();
        assertFalse(cx4.get(0).present(), "unplugged at deactivate");
        assertEquals(0, bus.functions().size());
        model.deactivate(); // idempotent
    }
}
