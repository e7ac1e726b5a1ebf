package org.peerdirect.ib.core.uverbs;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.ib.core.provider.IbUcontextOps;
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

/**
 * {@code struct ib_ucontext} / the uverbs file of one process: owns the PDs, CQs and channels
 * created through it; {@link #close} (the user's, or the process's exit) destroys what is left.
 */
final class UContext implements IbvContext {

    final IbDevice dev;
    final AddressSpace process;
    final IbUcontextOps ops;
    final List<UPd> pds = new CopyOnWriteArrayList<>();
    final List<UCq> cqs = new CopyOnWriteArrayList<>();
    final List<UCompChannel> channels = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    UContext(IbDevice dev, AddressSpace process, IbUcontextOps ops) {
        this.dev = dev;
        this.process = process;
        this.ops = ops;
    }

    /** EIO once the device is gone, EINVAL once the context is closed. */
    void alive() {
        dev.alive();
        if (closed) {
            throw new KernelException(Errno.EINVAL, dev.name() + ": the context is closed");
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
        return dev.ops.queryDevice();
    }

    @Override
    public IbvDeviceAttr queryDeviceEx() {
        return queryDevice();
    }

    @Override
    public IbvPortAttr queryPort(int port) {
        alive();
        checkPort(port);
        return dev.ops.queryPort(port);
    }

    void checkPort(int port) {
        if (port < 1 || port > dev.attr.physPortCnt()) {
            throw new KernelException(Errno.EINVAL, dev.name() + ": no port " + port + " (ports 1.." + dev.attr.physPortCnt() + ")");
        }
    }

    @Override
    public String queryGid(int port, int index) {
        alive();
        checkPort(port);
        return dev.ops.queryGid(port, index);
    }

    @Override
    public IbvPd allocPd() {
        alive();
        UPd pd = new UPd(this, ops.allocPd());
        pds.add(pd);
        return pd;
    }

    @Override
    public IbvCompChannel createCompChannel() {
        alive();
        UCompChannel ch = new UCompChannel(this);
        channels.add(ch);
        return ch;
    }

    @Override
    public IbvCq createCq(int cqe, IbvCompChannel channel) {
        alive();
        UCompChannel ch = null;
        if (channel != null) {
            if (!(channel instanceof UCompChannel c) || c.ctx != this) {
                throw new KernelException(Errno.EINVAL, "ibv_create_cq: the completion channel belongs to another context");
            }
            ch = c;
        }
        if (cqe < 1 || cqe > dev.attr.maxCqe()) {
            throw new KernelException(Errno.EINVAL, "ibv_create_cq: " + cqe + " entries is not 1.." + dev.attr.maxCqe() + " (max_cqe)");
        }
        UCq cq = new UCq(this, cqe, ch);
        cqs.add(cq);
        return cq;
    }

    /** The device is gone: wake the channel waiters, give every MR's memory back, QPs to error. */
    void disassociate() {
        for (UCompChannel ch : channels) {
            ch.wakeAll();
        }
        for (UPd pd : pds) {
            pd.disassociate();
        }
    }

    /**
     * {@code ibv_close_device} and the process's exit: destroys every object left, QPs first (a CQ
     * in use cannot go), then SRQs, MRs, AHs, PDs, CQs, channels; then the driver's context.
     * Idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            for (UPd pd : pds) {
                pd.destroyAll();
            }
            pds.clear();
            for (UCq cq : cqs) {
                cq.destroyQuietly();
            }
            cqs.clear();
            for (UCompChannel ch : channels) {
                ch.wakeAll();
            }
            channels.clear();
            ops.deallocUcontext();
        } finally {
            dev.closed(this);
            process.closeFile(this);
        }
    }

    @Override
    public String toString() {
        return dev.name() + " context of pid " + process.pid();
    }
}
