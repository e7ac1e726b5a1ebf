package org.peerdirect.ib.core.uverbs;

import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx;
import org.peerdirect.ib.core.verbs.IbvXrcd;
import org.peerdirect.ib.core.verbs.IbvQpOpenAttr;
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
    /** XRC domains this context opened, and the XRC receive QPs it created (they have no PD). */
    final List<UXrcd> xrcds = new CopyOnWriteArrayList<>();
    final List<UQp> xrcQps = new CopyOnWriteArrayList<>();
    private volatile boolean closed;
    /**
     * The async event file ({@code ib_uverbs_async_event_file}). Lock rules: {@link #eventLock}
     * guards {@link #events} and {@link #eventsEnded}; it is a leaf (drivers call
     * {@link #asyncEvent} from their event handlers holding their own locks).
     */
    private final ReentrantLock eventLock = new ReentrantLock();
    private final Condition eventArrived = eventLock.newCondition();
    private final ArrayDeque<IbvAsyncEvent> events = new ArrayDeque<>();
    /** Set with DEVICE_FATAL queued, at disassociation: nothing more is queued, and an empty queue reads EIO. */
    private boolean eventsEnded;

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
    public Object driverMethod(String method, Object... attrs) {
        alive();
        return ops.driverMethod(method, objectAttrs(method, attrs));
    }

    /**
     * A driver method's object attributes ({@code UVERBS_ATTR_IDR}): a PD is looked up among this
     * context's objects ({@code uverbs_get_uobject_from_file}) and reaches the driver as its
     * {@code IbPdOps}; a PD of another context, or one deallocated, is not found: ENOENT, as
     * {@code lookup_get_idr_uobject} answers for a handle the file does not hold.
     */
    private Object[] objectAttrs(String method, Object[] attrs) {
        Object[] out = attrs;
        for (int i = 0; i < attrs.length; i++) {
            if (attrs[i] instanceof IbvPd pd) {
                if (!(pd instanceof UPd u) || u.ctx != this || !pds.contains(u)) {
                    throw new KernelException(Errno.ENOENT, dev.name() + ": " + method + ": the PD is no object of this context");
                }
                if (out == attrs) {
                    out = attrs.clone();
                }
                out[i] = u.ops;
            }
        }
        return out;
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

    /**
     * {@code ib_uverbs_open_xrcd}: fd -1 allocates a domain of this context; a file descriptor
     * finds the domain of its file on this device (the file object stands for the inode) or, with
     * O_CREAT, allocates it; O_EXCL with one there is EINVAL, none without O_CREAT is EAGAIN.
     */
    @Override
    public IbvXrcd openXrcd(int fd, int oflags) {
        alive();
        if ((dev.attr.deviceCapFlags() & IbvDeviceAttr.DEVICE_XRC) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_open_xrcd: " + dev.name() + " does not report IBV_DEVICE_XRC");
        }
        if ((oflags & ~(IbvXrcd.O_CREAT | IbvXrcd.O_EXCL)) != 0) {
            throw new KernelException(Errno.EINVAL, "ibv_open_xrcd: oflags 0" + Integer.toOctalString(oflags)
                    + " is not a set of O_CREAT (0100) and O_EXCL (0200)");
        }
        Object file = fd == -1 ? null : process.fget(fd); // EBADF names the descriptor
        dev.xrcdLock.lock();
        try {
            UXrcd.Domain d = file == null ? null : dev.xrcds.get(file);
            if (d != null && (oflags & IbvXrcd.O_EXCL) != 0) {
                throw new KernelException(Errno.EINVAL, "ibv_open_xrcd: fd " + fd + " already has an XRC domain on " + dev.name() + " (O_EXCL)");
            }
            if (d == null && file != null && (oflags & IbvXrcd.O_CREAT) == 0) {
                throw new KernelException(Errno.EAGAIN, "ibv_open_xrcd: fd " + fd + " has no XRC domain on " + dev.name()
                        + " and oflags lacks O_CREAT");
            }
            if (d == null) {
                d = new UXrcd.Domain(dev, ops.allocXrcd(), file);
                if (file != null) {
                    dev.xrcds.put(file, d);
                }
            }
            d.opens++;
            UXrcd x = new UXrcd(this, d);
            xrcds.add(x);
            return x;
        } finally {
            dev.xrcdLock.unlock();
        }
    }

    /** This context's live opening of an XRC domain. */
    UXrcd xrcdOf(IbvXrcd x, String verb) {
        if (!(x instanceof UXrcd u) || u.ctx != this) {
            throw new KernelException(Errno.EINVAL, verb + ": " + (x == null ? "no XRC domain" : "the XRC domain was opened by another context"));
        }
        u.alive(verb);
        return u;
    }

    @Override
    public IbvSrq createSrqEx(IbvSrqInitAttrEx a) {
        alive();
        if (a == null || a.srqType == null || !(a.pd instanceof UPd pd) || pd.ctx != this) {
            throw new KernelException(Errno.EINVAL, "ibv_create_srq_ex: " + (a == null || a.srqType == null ? "no SRQ type" : "the PD is missing or of another context"));
        }
        return a.srqType == IbvSrqInitAttrEx.SrqType.BASIC ? pd.createSrq(a.maxWr, a.maxSge) : pd.createXrcSrq(a);
    }

    /**
     * {@code ib_uverbs_create_qp} of the extended verb: an XRC receive QP from its domain alone;
     * every other type through its PD.
     */
    @Override
    public IbvQp createQpEx(IbvQpInitAttr a) {
        alive();
        if (a == null || a.qpType == null) {
            throw new KernelException(Errno.EINVAL, "ibv_create_qp_ex: no QP type");
        }
        if (a.qpType != IbvQpType.XRC_RECV) {
            if (!(a.pd instanceof UPd pd) || pd.ctx != this) {
                throw new KernelException(Errno.EINVAL, "ibv_create_qp_ex: a " + a.qpType + " QP needs a PD of this context");
            }
            return pd.createQp(a);
        }
        UXrcd x = xrcdOf(a.xrcd, "ibv_create_qp_ex");
        x.domain.use();
        UXrcd.TgtQp real = new UXrcd.TgtQp(x.domain);
        try {
            real.ops = ops.createXrcTgtQp(x.domain.ops, real);
        } catch (RuntimeException e) {
            x.domain.release();
            throw e;
        }
        UQp qp = new UQp(this, null, a, real.ops, null, null, null, real);
        real.created(qp);
        xrcQps.add(qp);
        return qp;
    }

    /** {@code ib_uverbs_open_qp}: see {@link IbvContext#openQp}. */
    @Override
    public IbvQp openQp(IbvQpOpenAttr attr) {
        alive();
        if (attr == null || attr.qpType != IbvQpType.XRC_RECV) {
            throw new KernelException(Errno.EINVAL, "ibv_open_qp: only an XRC receive QP (IBV_QPT_XRC_RECV) is opened, not "
                    + (attr == null ? "nothing" : attr.qpType));
        }
        UQp h = xrcdOf(attr.xrcd, "ibv_open_qp").openQp(attr.qpNum);
        xrcQps.add(h);
        return h;
    }

    /**
     * Queues an event for {@link #getAsyncEvent} ({@code ib_uverbs_async_handler}); dropped once
     * the context is closed or its events ended. Never blocks.
     */
    void asyncEvent(IbvAsyncEvent e) {
        eventLock.lock();
        try {
            if (closed || eventsEnded) {
                return;
            }
            events.add(e);
            eventArrived.signalAll();
        } finally {
            eventLock.unlock();
        }
    }

    @Override
    public IbvAsyncEvent getAsyncEvent(long timeout, TimeUnit unit) throws InterruptedException {
        long left = unit.toNanos(timeout);
        eventLock.lock();
        try {
            while (true) {
                if (closed) {
                    throw new KernelException(Errno.EINVAL, dev.name() + ": ibv_get_async_event: the context is closed");
                }
                IbvAsyncEvent e = events.poll();
                if (e != null) {
                    return e;
                }
                if (eventsEnded) {
                    throw dev.removedError();
                }
                if (left <= 0) {
                    return null;
                }
                left = eventArrived.awaitNanos(left);
            }
        } finally {
            eventLock.unlock();
        }
    }

    /**
     * The device is gone ({@code ib_uverbs_free_hw_resources}): DEVICE_FATAL to the async events
     * first, then wake the channel waiters, give every MR's memory back, QPs to error.
     */
    void disassociate() {
        eventLock.lock();
        try {
            if (!closed && !eventsEnded) {
                events.add(IbvAsyncEvent.deviceFatal());
            }
            eventsEnded = true;
            eventArrived.signalAll();
        } finally {
            eventLock.unlock();
        }
        for (UCompChannel ch : channels) {
            ch.wakeAll();
        }
        for (UQp qp : xrcQps) {
            qp.toErrorQuietly();
        }
        for (UPd pd : pds) {
            pd.disassociate();
        }
    }

    /**
     * {@code ibv_close_device} and the process's exit: destroys every object left, the driver's own
     * first ({@link IbUcontextOps#destroyDriverObjects}), then QPs (a CQ
     * in use cannot go; XRC receive QPs first of all), then SRQs, MRs, AHs, PDs, XRC domains, CQs, channels; then the driver's context.
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
            ops.destroyDriverObjects(); // they may refer to the objects below (DevX: a window to an MR)
            for (UQp qp : xrcQps) {
                qp.destroy(); // they use no PD or CQ, only their domain
            }
            for (UPd pd : pds) {
                pd.destroyAll();
            }
            pds.clear();
            for (UXrcd x : xrcds) {
                x.close(); // after the PDs' XRC SRQs: nothing of this context uses them now
            }
            for (UCq cq : cqs) {
                cq.destroyQuietly();
            }
            cqs.clear();
            for (UCompChannel ch : channels) {
                ch.destroyedByClose();
            }
            channels.clear();
            eventLock.lock();
            try {
                events.clear();
                eventArrived.signalAll(); // a waiter reads EINVAL
            } finally {
                eventLock.unlock();
            }
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
