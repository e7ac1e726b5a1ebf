package org.peerdirect.hca.cx4;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

import org.peerdirect.hca.cx4.ifc.DpaObj;
import org.peerdirect.hca.dpa.CheckMode;
import org.peerdirect.hca.dpa.DpaUnit;

/**
 * The DPA hooks of a {@link ConnectX4Device} for tests, tools ({@code dpa:*}) and the bench: the
 * DPA firmware, its unit's views and figures, the checker's mode. The device's public methods
 * delegate here. Each call reads the device's firmware once (it is replaced at power-on, gone
 * after close) and the DPA unit it made, if any; nothing is cached.
 */
final class DpaHooks {

    private static final List<String> NO_OBJECT = List.of("no DPA object yet");

    private final ConnectX4Device dev;
    private final String name;
    private final int deviceId;

    DpaHooks(ConnectX4Device dev, String name, int deviceId) {
        this.dev = dev;
        this.name = name;
        this.deviceId = deviceId;
    }

    /** The BlueField-3's DPA; refused on a device without one or before power-on. */
    FirmwareDpa dpa() {
        Firmware f = dev.firmware();
        if (f == null || f.dpa == null) {
            throw new IllegalStateException(name + ": " + (f == null ? "not powered" : ConnectX4Device.modelName(deviceId) + " has no DPA"));
        }
        return f.dpa;
    }

    /** The DPA capability block's fields by name; empty before power-on. */
    Map<String, Long> capValues() {
        Firmware f = dev.firmware();
        return f == null ? Map.of() : f.caps.dpaValues();
    }

    /** The DPA capability block, one {@code name value} line per field; empty before power-on. */
    List<String> caps() {
        Firmware f = dev.firmware();
        return f == null ? List.of() : f.caps.describeDpa();
    }

    /** The DPA unit made at the first DPA object, or null (no power, no DPA, no object yet). */
    private DpaUnit unit() {
        Firmware f = dev.firmware();
        return f == null || f.dpa == null ? null : f.dpa.unitIfAny();
    }

    /** A {@code dpa:} view of the unit; one line when the DPA runs nothing. */
    List<String> view(Function<DpaUnit, List<String>> view) {
        DpaUnit u = unit();
        return u == null ? NO_OBJECT : view.apply(u);
    }

    long[] wakeNanos(boolean reset, double... ps) {
        DpaUnit u = unit();
        return u == null ? new long[ps.length] : u.wakeNanos(reset, ps);
    }

    long[] euTotals() {
        DpaUnit u = unit();
        return u == null ? new long[3] : u.euTotals();
    }

    void checkMode(String mode) {
        FirmwareDpa d = dpa();
        d.configure(d.config().withCheck(CheckMode.valueOf(mode.toUpperCase(Locale.ROOT))), d.policy());
    }

    void elidePolls(boolean elide) {
        FirmwareDpa d = dpa();
        d.configure(d.config().withElidePolls(elide), d.policy());
    }

    /** {@code dpa:threads}: one line per DPA thread object; one line when there is none. */
    List<String> threads() {
        Firmware f = dev.firmware();
        DpaUnit u = f == null || f.dpa == null ? null : f.dpa.unitIfAny();
        List<String> l = new ArrayList<>();
        if (u != null) {
            for (int tid : f.generalObjects.ids(DpaObj.OBJ_DPA_THREAD)) {
                try {
                    l.add(u.describeThread(tid));
                } catch (IllegalArgumentException gone) { // destroyed meanwhile
                }
            }
        }
        return l.isEmpty() ? List.of("no DPA thread") : l;
    }
}
