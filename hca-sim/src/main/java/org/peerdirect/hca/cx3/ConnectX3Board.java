package org.peerdirect.hca.cx3;

import static org.peerdirect.hca.cx3.ifc.Be.BE64;

import java.util.function.Function;

import org.peerdirect.hca.cx3.fw.ConnectX3Device;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.boards.SiliconView;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A ConnectX-3 board: its node GUID and the device on its PCI function (the HCR command
 * interface, UAR pages, MSI-X, the firmware that starts the engine at {@code INIT_HCA}). The model,
 * the test kit and the benchmarks build boards with {@link #onFabric}; the lab's and the tests'
 * views ({@link #silicon}, {@link #siliconIfUp}, {@link #describe}) are the silicon's, not a driver's.
 */
public final class ConnectX3Board {

    /** The ConnectX-3's PCI ids ({@code 15b3:1003}). */
    public static final int VENDOR_ID = 0x15b3;
    public static final int DEVICE_ID = 0x1003;

    private final long nodeGuid;
    private final ConnectX3Device device;

    /**
     * A board with {@code ports} ports whose engine {@code bringUp} creates at the first
     * {@code INIT_HCA} (again after a chip reset), from the function (its bus address names the
     * engine, its DMA port is the engine's only way to memory).
     */
    private ConnectX3Board(long nodeGuid, int ports, Function<PciFunction, HcaDevice> bringUp) {
        this.nodeGuid = nodeGuid;
        this.device = new ConnectX3Device("Mellanox Technologies MT27500 Family [ConnectX-3]", nodeGuid, ports, bringUp);
    }

    /**
     * Board {@code index} of a machine: its GUID from the index, its engine brought up at
     * {@code INIT_HCA} with {@code ports} ports on {@code fabric}, reaching memory through the
     * function's DMA port.
     */
    public static ConnectX3Board onFabric(int index, Fabric fabric, int ports) {
        return new ConnectX3Board(guid(index), ports, fn -> {
            HcaDevice e = new HcaDevice(fn.bdf(), fn.dmaPort(), fabric, ports);
            long guid = guid(index);
            e.setPortGid((p, to, off) -> { // the subnet's link-local prefix and the port GUID (node GUID + port), as GuidInfo says
                to.set(BE64, off, 0xfe80_0000_0000_0000L);
                to.set(BE64, off + 8, guid + p.portNum());
            });
            return e;
        });
    }

    /**
     * The PCI function of a ConnectX-3: vendor 0x15b3, device 0x1003, class 0x020700
     * (InfiniBand), BAR 0 (1 MiB, the HCR and the reset register), BAR 2 (8 MiB, UAR pages),
     * 8 MSI-X vectors.
     */
    public PciDeviceSpec spec() {
        return device.spec().build();
    }

    /** The node GUID of board {@code index} (Mellanox OUI 00:02:c9). */
    public static long guid(int index) {
        return 0x0002_c903_0000_1000L + index * 0x10L;
    }

    /**
     * A surprise hot-unplug's first half: the silicon a driver's {@code INIT_HCA} brought up stops
     * (no DMA, no completion after this returns); the function leaves the bus after it. Idempotent.
     */
    public void stopSilicon() {
        HcaDevice e = device.engineIfUp();
        if (e != null) {
            e.remove();
        }
    }

    /**
     * What a lab sees of the silicon a driver's {@code INIT_HCA} brought up (after a chip reset,
     * the new one's).
     *
     * @throws IllegalStateException before that
     */
    public SiliconView silicon() {
        SiliconView v = siliconIfUp();
        if (v == null) {
            throw new IllegalStateException("ConnectX-3 board " + Long.toHexString(nodeGuid) + ": INIT_HCA was not run");
        }
        return v;
    }

    /** The lab's view of the silicon if a driver's {@code INIT_HCA} brought it up, else null. */
    public SiliconView siliconIfUp() {
        HcaDevice e = device.engineIfUp();
        return e == null ? null : e.view();
    }

    public long nodeGuid() {
        return nodeGuid;
    }

    /** The firmware's state, lent memory and EQs, for tools. */
    public String describe() {
        return device.describe();
    }

    /** The reason of the last command the firmware refused. */
    public String lastRefusal() {
        return device.lastRefusal();
    }

    /** Commands the firmware executed and refused. */
    public long commandsExecuted() {
        return device.commandsExecuted();
    }

    public long commandsRefused() {
        return device.commandsRefused();
    }
}
