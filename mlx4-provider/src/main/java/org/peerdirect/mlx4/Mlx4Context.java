package org.peerdirect.mlx4;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.hca.engine.HcaPort;
import org.peerdirect.hca.engine.HwCompChannel;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/** {@code struct mlx4_ib_ucontext}: the device opened by one process. */
final class Mlx4Context implements IbvContext {

    final Mlx4Device dev;
    final AddressSpace process;
    final List<Mlx4Pd> pds = new CopyOnWriteArrayList<>();
    /** CQs and channels created here: closing the context destroys what the user left. */
    private final List<org.peerdirect.hca.engine.HwCq> cqs = new CopyOnWriteArrayList<>();
    private final List<HwCompChannel> channels = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    Mlx4Context(Mlx4Device dev, AddressSpace process) {
        this.dev = dev;
        this.process = process;
    }

    void alive() {
        dev.alive();
        if (closed) {
            throw new KernelException(Errno.EINVAL, dev.name + ": the context is closed");
        }
    }

    @Override
    public IbvDevice device() {
        return dev;
    }

    @Override
    public AddressSpace process() {
        return process;
    }

    @Override
    public IbvDeviceAttr queryDevice() {
        alive();
        return dev.attributes();
    }

    @Override
    public IbvDeviceAttr queryDeviceEx() {
        return queryDevice();
    }

    @Override
    public IbvPortAttr queryPort(int port) {
        alive();
        HcaPort p = dev.engine.port(port);
        return new IbvPortAttr(p.active() ? IbvPortAttr.PORT_ACTIVE : IbvPortAttr.PORT_DOWN, 5, 5, 128, 0x02514868, 0x40000000L,
                128, p.lid(), 1, 0, 8, 0, 2, 16, p.active() ? 5 : 3, IbvPortAttr.LINK_LAYER_INFINIBAND);
    }

    @Override
    public String queryGid(int port, int index) {
        alive();
        dev.engine.port(port);
        if (index != 0) {
            throw new KernelException(Errno.EINVAL, dev.name + ": GID index " + index + " is not populated");
        }
        long g = dev.nodeGuid() + port;
        return String.format("fe80:0000:0000:0000:%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff,
                g & 0xffff);
    }

    @Override
    public IbvPd allocPd() {
        alive();
        Mlx4Pd pd = new Mlx4Pd(this, dev.nextPdn.getAndIncrement());
        pds.add(pd);
        return pd;
    }

    @Override
    public IbvCompChannel createCompChannel() {
        alive();
        HwCompChannel ch = dev.engine.createCompChannel();
        channels.add(ch);
        return ch;
    }

    @Override
    public IbvCq createCq(int cqe, IbvCompChannel channel) {
        alive();
        if (channel != null && !(channel instanceof HwCompChannel)) {
            throw new KernelException(Errno.EINVAL, dev.name + ": the completion channel belongs to another device");
        }
        org.peerdirect.hca.engine.HwCq cq = dev.engine.createCq(cqe, (HwCompChannel) channel);
        cqs.add(cq);
        return cq;
    }

    /** The device is gone: every MR's memory goes back (pins, peer pages); objects stay, dead. */
    void deviceRemoved() {
        for (Mlx4Pd pd : pds) {
            pd.deviceRemoved();
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Mlx4Pd pd : pds) {
            pd.destroyAll(); // QPs first: a CQ in use cannot be destroyed
        }
        pds.clear();
        for (org.peerdirect.hca.engine.HwCq cq : cqs) {
            cq.destroy(); // idempotent for the ones the user destroyed
        }
        cqs.clear();
        channels.clear(); // a channel holds nothing once its CQs are gone
        dev.closed(this);
    }
}
