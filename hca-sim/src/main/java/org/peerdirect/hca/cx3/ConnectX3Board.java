package org.peerdirect.hca.cx3;

import java.util.function.Function;

import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A ConnectX-3 board's firmware: its node GUID, firmware version and board id, and its engine.
 * The model puts the board into the function's spec, so a driver never sees the function without
 * it; the engine is brought up by the driver's {@link #initHca} ({@code INIT_HCA}), named by the
 * function's bus address, on the driver's thread. (A driver may bind while the bus is still
 * registering the function, on the model's thread, so nothing here may wait for the model.)
 * Tests and benchmarks that build devices without OSGi use the constructor with an engine.
 *
 * <p>Lock rules: {@code this} guards {@link #engine}.
 */
public final class ConnectX3Board implements ConnectX3 {

    private final long nodeGuid;
    private final Function<String, HcaDevice> bringUp;
    private HcaDevice engine;

    /** A board whose engine {@code bringUp} creates at the first {@code INIT_HCA}, from the bus address. */
    public ConnectX3Board(long nodeGuid, Function<String, HcaDevice> bringUp) {
        this.nodeGuid = nodeGuid;
        this.bringUp = bringUp;
    }

    /** A board with its engine. */
    public ConnectX3Board(HcaDevice engine, long nodeGuid) {
        this.nodeGuid = nodeGuid;
        this.bringUp = null;
        this.engine = engine;
    }

    /** The node GUID of board {@code index} (Mellanox OUI 00:02:c9). */
    public static long guid(int index) {
        return 0x0002_c903_0000_1000L + index * 0x10L;
    }

    @Override
    public synchronized HcaDevice initHca(PciFunction fn) {
        if (engine == null) {
            engine = bringUp.apply(fn.bdf());
        }
        return engine;
    }

    @Override
    public synchronized HcaDevice engine() {
        if (engine == null) {
            throw new IllegalStateException("ConnectX-3 board " + Long.toHexString(nodeGuid) + ": INIT_HCA was not run");
        }
        return engine;
    }

    /** The engine if INIT_HCA ran, else null (for the model's teardown). */
    public synchronized HcaDevice engineIfUp() {
        return engine;
    }

    @Override
    public String bdf() {
        return engine().name();
    }

    @Override
    public long nodeGuid() {
        return nodeGuid;
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
