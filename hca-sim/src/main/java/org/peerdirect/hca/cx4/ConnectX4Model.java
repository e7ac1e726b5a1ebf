package org.peerdirect.hca.cx4;

import java.util.ArrayList;
import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * Plugs ConnectX-4+ models into the PCI bus (Configuration Admin PID {@code org.peerdirect.hca.cx4}:
 * {@code connectx4}, default 1, {@code connectx6dx}, default 1, and {@code bluefield3}, default 1,
 * so every kind is always exercised). A function's power-on reset starts its firmware before any driver can bind.
 * Stopping the bundle is a surprise hot-unplug: the functions leave the bus first (the driver's
 * removal runs on this thread and finds the function gone, so it sends no command), then the
 * firmware threads stop.
 */
@Component(service = ConnectX4Model.class, immediate = true, configurationPid = "org.peerdirect.hca.cx4")
@Designate(ocd = ConnectX4Model.Config.class)
public final class ConnectX4Model {

    @ObjectClassDefinition(name = "ConnectX-4+ models",
            description = "How many ConnectX-4 (15b3:1013, InfiniBand), ConnectX-6 Dx (15b3:101d, Ethernet) and BlueField-3 (15b3:a2dc, "
                    + "Ethernet, DevX and DPA) functions sit on the PCI bus. "
                    + "A change plugs in or removes only the difference; the others keep running.")
    @interface Config {
        @AttributeDefinition(min = "0", max = "8", description = "number of ConnectX-4 devices (0 to 8)")
        int connectx4() default 1;

        @AttributeDefinition(min = "0", max = "8", description = "number of ConnectX-6 Dx devices (0 to 8)")
        int connectx6dx() default 1;

        @AttributeDefinition(min = "0", max = "8", description = "number of BlueField-3 devices (0 to 8)")
        int bluefield3() default 1;
    }

    private record Board(ConnectX4Device dev, PciFunction fn) {
    }

    /** Guarded by this: the functions plugged in, of each kind in plug order. */
    private final List<Board> connectx4 = new ArrayList<>();
    private final List<Board> connectx6dx = new ArrayList<>();
    private final List<Board> bluefield3 = new ArrayList<>();
    private final PciBus bus;
    private final org.peerdirect.hca.boards.Fabric fabric;

    @Activate
    public ConnectX4Model(@Reference PciBus bus, @Reference org.peerdirect.hca.boards.Fabric fabric, Config c) {
        this.bus = bus;
        this.fabric = fabric;
        modified(c);
    }

    /**
     * A configuration change plugs in or removes only the difference: the functions already on
     * the bus keep running (their drivers, users and traffic with them). A delivery that changes
     * nothing (Configuration Admin re-delivers after the guard put back a rejected value) touches
     * nothing. Removal takes the newest of a kind first.
     */
    @Modified
    synchronized void modified(Config c) {
        if (c.connectx4() < 0 || c.connectx4() > 8 || c.connectx6dx() < 0 || c.connectx6dx() > 8 || c.bluefield3() < 0 || c.bluefield3() > 8) {
            throw new IllegalArgumentException("org.peerdirect.hca.cx4: connectx4, connectx6dx and bluefield3 must be 0..8, not " + c.connectx4()
                    + "/" + c.connectx6dx() + "/" + c.bluefield3());
        }
        resize(connectx4, c.connectx4(), ConnectX4Device.DEVICE_CONNECTX4);
        resize(connectx6dx, c.connectx6dx(), ConnectX4Device.DEVICE_CONNECTX6DX);
        resize(bluefield3, c.bluefield3(), ConnectX4Device.DEVICE_BLUEFIELD3);
    }

    /** Unplugs the newest of {@code kind} down to {@code n}, or plugs new ones up to it. */
    private void resize(List<Board> kind, int n, int deviceId) {
        assert Thread.holdsLock(this);
        while (kind.size() > n) {
            Board b = kind.remove(kind.size() - 1);
            b.fn.remove(); // surprise removal: the driver's removal listener runs here
            b.dev.close();
        }
        while (kind.size() < n) {
            ConnectX4Device dev = new ConnectX4Device(ConnectX4Device.modelName(deviceId), deviceId, fabric);
            // a driver already active binds during register, on this thread: the firmware is up by then
            kind.add(new Board(dev, bus.register(dev.spec())));
        }
    }

    /** The models plugged in now, with their bus addresses (for the shell's fault injection). */
    public synchronized java.util.Map<String, ConnectX4Device> devices() {
        java.util.Map<String, ConnectX4Device> m = new java.util.TreeMap<>();
        for (List<Board> kind : List.of(connectx4, connectx6dx, bluefield3)) {
            for (Board b : kind) {
                m.put(b.fn.bdf(), b.dev);
            }
        }
        return m;
    }

    @Deactivate
    synchronized void deactivate() {
        resize(bluefield3, 0, ConnectX4Device.DEVICE_BLUEFIELD3);
        resize(connectx6dx, 0, ConnectX4Device.DEVICE_CONNECTX6DX);
        resize(connectx4, 0, ConnectX4Device.DEVICE_CONNECTX4);
    }
}
