package org.peerdirect.mlx4;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.hca.cx3.ConnectX3;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.DmaDevice;

/**
 * {@code struct mlx4_ib_dev}: the IB device the driver registers for one ConnectX-3 function. It is
 * also the DMA device its umems are mapped for.
 */
public final class Mlx4Device implements IbvDevice, DmaDevice {

    final String name;
    final ConnectX3 hw;
    final HcaDevice engine;
    final UmemService umems;
    private final List<Mlx4Context> contexts = new CopyOnWriteArrayList<>();
    final AtomicInteger nextPdn = new AtomicInteger(1);
    private volatile boolean removed;

    public Mlx4Device(String name, ConnectX3 hw, UmemService umems) {
        this.name = name;
        this.hw = hw;
        this.engine = hw.engine();
        this.umems = umems;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long nodeGuid() {
        return hw.nodeGuid();
    }

    @Override
    public String driver() {
        return "mlx4";
    }

    @Override
    public IommuDomain iommuDomain() {
        return engine.domain();
    }

    @Override
    public IbvContext open(AddressSpace process) {
        alive();
        if (process == null || process.exited()) {
            throw new KernelException(Errno.EINVAL, name + ": ibv_open_device needs a live process");
        }
        Mlx4Context c = new Mlx4Context(this, process);
        contexts.add(c);
        return c;
    }

    void closed(Mlx4Context c) {
        contexts.remove(c);
    }

    void alive() {
        if (removed) {
            throw new KernelException(Errno.EIO, "device " + name + " was removed");
        }
    }

    @Override
    public boolean removed() {
        return removed;
    }

    public HcaDevice engine() {
        return engine;
    }

    /** mlx4's attributes (a ConnectX-3 with firmware 2.42): no ODP. */
    IbvDeviceAttr attributes() {
        return new IbvDeviceAttr(hw.firmwareVersion(), hw.nodeGuid(), hw.nodeGuid(), 0xFFFF_FFFF_FFFF_FFFFL, 0xFFFF_FE00L,
                0x02c9 /* the Mellanox IEEE OUI, as ibv_devinfo shows */, ConnectX3.DEVICE_ID, 1, HcaDevice.MAX_QP, HcaDevice.MAX_QP_WR, 0x5c76, HcaDevice.MAX_SGE,
                65408, HcaDevice.MAX_CQE, 524032, 32764, 16, 128, IbvDeviceAttr.ATOMIC_HCA, 65472, 16383, 31,
                HcaDevice.MAX_INLINE, engine.portCount(), IbvDeviceAttr.OdpCaps.NONE);
    }

    /** {@link #remove(boolean) remove(true)}: a surprise hot-unplug. */
    public void remove() {
        remove(true);
    }

    /**
     * {@code mlx4_remove_one}: the device's QPs go to error with their work flushed and its keys
     * are revoked (a surprise removal kills the hardware; a driver unbind resets it for the next
     * driver), then every context's MRs release their memory. Objects stay for their owners to
     * destroy; every verb on them now fails with EIO. Idempotent.
     */
    public void remove(boolean surprise) {
        if (removed) {
            return;
        }
        removed = true;
        if (surprise) {
            engine.remove();
        } else {
            engine.reset();
        }
        for (Mlx4Context c : contexts) {
            c.deviceRemoved();
        }
    }

    @Override
    public String toString() {
        return name + " (" + hw.bdf() + ")";
    }
}
