package org.peerdirect.hca.cx3;

import org.peerdirect.hca.engine.HcaDevice;

/**
 * A ConnectX-3 board: its PCI address, its engine and its node GUID, with the firmware version
 * and board id every model of this bundle reports. The model publishes these; tests and
 * benchmarks that build devices without OSGi use the same.
 */
public record ConnectX3Board(String bdf, HcaDevice engine, long nodeGuid) implements ConnectX3 {

    /** The node GUID of board {@code index} (Mellanox OUI 00:02:c9). */
    public static long guid(int index) {
        return 0x0002_c903_0000_1000L + index * 0x10L;
    }

    @Override
    public String firmwareVersion() {
        return "2.42.5000";
    }

    @Override
    public String boardId() {
        return "MT_1090120019";
    }
}
