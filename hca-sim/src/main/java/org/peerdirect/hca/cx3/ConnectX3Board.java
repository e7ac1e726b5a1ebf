package org.peerdirect.hca.cx3;

import java.util.function.Function;

import org.peerdirect.kernel.pci.PciDeviceSpec;

import org.peerdirect.hca.engine.Fabric;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A ConnectX-3 board's firmware: its node GUID, firmware version and board id, and its engine.
 * The model puts the board into the function's spec, so a driver never sees the function without
 * it; the engine is brought up by the driver's {@link #initHca} ({@code INIT_HCA}), named by the
 * function's bus address, on the driver's thread. (A driver may bind while the bus is still
 * registering the function, on the model's thread, so nothing here may wait for the model.)
 *
 * <p>Lock rules: {@code this} guards {@link #engine}.
 */
public final class ConnectX3Board implements ConnectX3 {

    private final long nodeGuid;
    private final Function<PciFunction, HcaDevice> bringUp;
    private HcaDevice engine;

    /**
     * A board whose engine {@code bringUp} creates at the first {@code INIT_HCA}, from the function
     * (its bus address names the engine, its DMA port is the engine's only way to memory).
     */
    public ConnectX3Board(long nodeGuid, Function<PciFunction, HcaDevice> bringUp) {
        this.nodeGuid = nodeGuid;
        this.bringUp = bringUp;
    }

    /**
     * Board {@code index} of a machine: its GUID from the index, its engine brought up at
     * {@code INIT_HCA} with {@code ports} ports on {@code fabric}, reaching memory through the
     * function's DMA port. The one way the model, the test kit and the benchmarks build a board.
     */
    public static ConnectX3Board onFabric(int index, Fabric fabric, int ports) {
        return new ConnectX3Board(guid(index), fn -> new HcaDevice(fn.bdf(), fn.dmaPort(), fabric, ports));
    }

    /**
     * The PCI function of a ConnectX-3 with this board as its firmware: vendor 0x15b3, device
     * 0x1003, class 0x020700 (InfiniBand), BAR 0 (1 MiB, the HCR and command registers), BAR 2
     * (8 MiB, UAR pages), 8 MSI-X vectors.
     */
    public PciDeviceSpec spec() {
        return PciDeviceSpec.builder("Mellanox Technologies MT27500 Family [ConnectX-3]")
                .vendorId(VENDOR_ID).deviceId(DEVICE_ID).classCode(0x020700)
                .bar(0, 1 << 20).bar(2, 8 << 20).msixVectors(8).firmware(this).build();
    }

    /** The node GUID of board {@code index} (Mellanox OUI 00:02:c9). */
    public static long guid(int index) {
        return 0x0002_c903_0000_1000L + index * 0x10L;
    }

    @Override
    public synchronized HcaDevice initHca(PciFunction fn) {
        if (engine == null) {
            engine = bringUp.apply(fn);
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
