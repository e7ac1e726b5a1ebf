package org.peerdirect.hca.cx3.impl;

import java.util.ArrayList;
import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.hca.cx3.ConnectX3;
import org.peerdirect.hca.cx3.ConnectX3Board;
import org.peerdirect.hca.engine.Fabric;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * Plugs ConnectX-3 models into the PCI bus (Configuration Admin PID {@code org.peerdirect.hca.cx3}:
 * {@code devices}, default 2, linked on one fabric so two devices can talk). Stopping the bundle
 * is a surprise hot-unplug of all of them: the engines stop, the functions leave the bus (the
 * driver unbinds on that same thread), then the IOMMU domains go.
 */
@Component(immediate = true, configurationPid = "org.peerdirect.hca.cx3")
public final class ConnectX3Model {

    @interface Config {
        int devices() default 2;

        int ports() default 1;
    }

    private record Board(HcaDevice engine, PciFunction fn, IommuDomain domain) {
    }

    private final Iommu iommu;
    private final List<Board> boards = new ArrayList<>();

    @Activate
    public ConnectX3Model(@Reference PciBus bus, @Reference Iommu iommu, @Reference Fabric fabric, Config c) {
        this.iommu = iommu;
        if (c.devices() < 0 || c.devices() > 16 || c.ports() < 1 || c.ports() > 2) {
            throw new IllegalArgumentException("org.peerdirect.hca.cx3: devices must be 0..16 and ports 1..2, not " + c.devices()
                    + "/" + c.ports());
        }
        for (int i = 0; i < c.devices(); i++) {
            // the firmware is part of the function's spec: a driver never sees the function without it;
            // the engine, named by the bus address, is attached right after (the driver's first
            // firmware call waits for it, bounded)
            ConnectX3Board board = new ConnectX3Board(ConnectX3Board.guid(i));
            PciFunction fn = bus.register(PciDeviceSpec.builder("Mellanox Technologies MT27500 Family [ConnectX-3]")
                    .vendorId(ConnectX3.VENDOR_ID).deviceId(ConnectX3.DEVICE_ID).classCode(0x020700)
                    .bar(0, 1 << 20).bar(2, 8 << 20).msixVectors(8).firmware(board).build());
            IommuDomain domain = iommu.createDomain(fn.bdf());
            HcaDevice engine = new HcaDevice(fn.bdf(), domain, fabric, c.ports());
            board.attach(engine);
            boards.add(new Board(engine, fn, domain));
        }
    }

    @Deactivate
    void deactivate() {
        for (Board b : boards) {
            b.engine.remove();
            b.fn.remove(); // the driver's removal listener and unbind run here, on this thread
            iommu.destroyDomain(b.domain);
        }
        boards.clear();
    }
}
