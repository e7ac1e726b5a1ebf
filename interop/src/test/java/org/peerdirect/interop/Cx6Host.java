package org.peerdirect.interop;

import java.nio.file.Path;
import java.util.List;

import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;
import org.peerdirect.rdma.tools.RdmaTools;
import org.peerdirect.testkit.Machine;

/**
 * One peerdirect host facing the rxe guest: a ConnectX-6 Dx model (Ethernet, RoCE) on the
 * testkit's {@link Machine} with mlx5_core and mlx5_ib on it ({@code mlx5_0}) and the rdma:*
 * tools over it. {@link #close} takes the driver down in its order, then the machine runs the audit.
 */
final class Cx6Host implements AutoCloseable {

    final Machine machine;
    final ConnectX4Device model;
    final Mlx5CoreDev core;
    final Mlx5IbDev ib;
    final IbvDevice dev;
    final RdmaTools tools;

    Cx6Host(Path tmp) {
        machine = Machine.builder(tmp).build();
        model = new ConnectX4Device("ConnectX-6 Dx", ConnectX4Device.DEVICE_CONNECTX6DX, new Fabric());
        PciFunction fn = machine.plug(model.spec());
        core = new Mlx5CoreDev("mlx5_0", fn, machine.mm(), new Mlx5CoreDev.Settings(10_000, 2_000, 2_000));
        core.load();
        ib = new Mlx5IbDev(core, machine.umems());
        dev = machine.core().register(ib);
        tools = new RdmaTools(new IbvDeviceList() {
            @Override
            public List<IbvDevice> devices() {
                return dev.removed() ? List.of() : List.of(dev);
            }

            @Override
            public IbvDevice device(String name) {
                return devices().stream().filter(d -> name == null || d.name().equals(name)).findFirst()
                        .orElseThrow(() -> new KernelException(KernelException.Errno.ENODEV, "no device " + name));
            }
        }, machine.mm());
    }

    @Override
    public void close() {
        try {
            WireGlue.detach(model, 1); // the tunnel's socket closes before the device goes
            machine.core().unregister(ib);
            ib.close();
            core.unload();
            if (core.dmaPagesLive() != 0) {
                throw new AssertionError("mlx5_0: " + core.dmaPagesLive() + " DMA pages of the driver live");
            }
            model.close();
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("detaching the port's wire", e);
        } finally {
            machine.close();
        }
    }
}
