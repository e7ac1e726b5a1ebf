package org.peerdirect.hca.cx3.impl;

import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.hca.cx3.ConnectX3Board;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * Plugs ConnectX-3 models into the PCI bus (Configuration Admin PID {@code org.peerdirect.hca.cx3}:
 * {@code devices}, default 2, linked on one fabric so two devices can talk). Stopping the bundle
 * is a surprise hot-unplug of all of them: the engines stop, then the functions leave the bus (the
 * driver unbinds on that same thread, then the bus detaches the functions' IOMMU domains). A model
 * never touches the IOMMU itself: its engines reach memory through their function's DMA port.
 */
@Component(service = ConnectX3Model.class, immediate = true, configurationPid = "org.peerdirect.hca.cx3")
@Designate(ocd = ConnectX3Model.Config.class)
public final class ConnectX3Model {

    @ObjectClassDefinition(name = "ConnectX-3 models",
            description = "How many ConnectX-3 HCAs sit on the PCI bus. A change of devices plugs in or removes only the difference; a change of ports re-creates them all.")
    @interface Config {
        @AttributeDefinition(min = "0", max = "16", description = "number of ConnectX-3 devices (0 to 16)")
        int devices() default 2;

        @AttributeDefinition(min = "1", max = "2", description = "ports per device (1 or 2)")
        int ports() default 1;
    }

    private record Board(ConnectX3Board board, PciFunction fn) {
    }

    /** Written under this (activate, modified, deactivate); read by the lab commands ({@link #boards}) from any thread. */
    private final List<Board> boards = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final PciBus bus;
    private final Fabric fabric;
    /** Guarded by this: the ports of every board plugged in. */
    private int ports;

    @Activate
    public ConnectX3Model(@Reference PciBus bus, @Reference Fabric fabric, Config c) {
        this.bus = bus;
        this.fabric = fabric;
        modified(c);
    }

    /**
     * A configuration change plugs in or removes only the difference in {@code devices} (the
     * newest first); the boards already on the bus keep running, with their drivers' users and
     * traffic. A change of {@code ports} re-creates every board (the port count is the board's).
     * A delivery that changes nothing (Configuration Admin re-delivers after the guard put back a
     * rejected value) touches nothing.
     */
    @Modified
    synchronized void modified(Config c) {
        if (c.devices() < 0 || c.devices() > 16 || c.ports() < 1 || c.ports() > 2) {
            throw new IllegalArgumentException("org.peerdirect.hca.cx3: devices must be 0..16 and ports 1..2, not " + c.devices()
                    + "/" + c.ports());
        }
        if (c.ports() != ports) {
            deactivate();
            ports = c.ports();
        }
        while (boards.size() > c.devices()) {
            unplug(boards.get(boards.size() - 1));
        }
        while (boards.size() < c.devices()) {
            // the firmware is part of the function's spec: a driver never sees the function without
            // it; the driver's INIT_HCA brings the engine up (a driver already active binds during
            // register, on this thread: nothing may wait for this loop)
            ConnectX3Board board = ConnectX3Board.onFabric(boards.size(), fabric, ports);
            boards.add(new Board(board, bus.register(board.spec())));
        }
    }

    private void unplug(Board b) {
        assert Thread.holdsLock(this);
        boards.remove(b);
        b.board.stopSilicon();
        b.fn.remove(); // the driver's removal listener and unbind run here, on this thread
    }

    /**
     * The lab's view (no driver's): each board by bus address; its engine exists once a driver's
     * {@code INIT_HCA} brought it up ({@link ConnectX3Board#siliconIfUp}). For {@code hca:link}.
     */
    public java.util.Map<String, ConnectX3Board> boards() {
        java.util.Map<String, ConnectX3Board> m = new java.util.TreeMap<>();
        for (Board b : boards) {
            m.put(b.fn.bdf(), b.board);
        }
        return m;
    }

    @Deactivate
    synchronized void deactivate() {
        while (!boards.isEmpty()) {
            unplug(boards.get(boards.size() - 1));
        }
    }
}
