package org.peerdirect.ib.core.uverbs;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The core's device ({@code struct ib_device} as users see it, {@code ib_uverbs_device}): it
 * wraps the driver's {@link IbDeviceOps}, opens contexts, and disassociates them when the device
 * goes.
 *
 * <p>Lock rules: {@code this} guards {@link #removed}'s transition and the context list against
 * a concurrent open (so no context escapes the disassociation).
 */
public final class IbDevice implements IbvDevice {

    final IbDeviceOps ops;
    final IbvDeviceAttr attr;
    private final List<UContext> contexts = new CopyOnWriteArrayList<>();
    volatile boolean removed;
    /** The kernel's {@code xrcd_tree_mutex}: guards {@link #xrcds} and every XRC domain's counts (see {@link UXrcd}). */
    final java.util.concurrent.locks.ReentrantLock xrcdLock = new java.util.concurrent.locks.ReentrantLock();
    /** XRC domains shared through a file ({@code xrcd_table}): the file → its domain on this device. */
    final java.util.Map<Object, UXrcd.Domain> xrcds = new java.util.HashMap<>();

    /** Also told of each port event (the core's sysfs port state); null: nobody. */
    private volatile org.peerdirect.ib.core.provider.IbDeviceEvents portListener;

    public IbDevice(IbDeviceOps ops) {
        this.ops = ops;
        this.attr = ops.queryDevice();
        ops.setEventHandler(this::portEvent);
    }

    /** Who else hears the port events (DeviceRegistry's sysfs attributes). */
    public void setPortListener(org.peerdirect.ib.core.provider.IbDeviceEvents l) {
        portListener = l;
    }

    /** {@code ib_dispatch_event} of a port event: to every context open on the device, until it is removed. */
    private void portEvent(int port, IbvEventType type) {
        if (removed || type == null || type.element() != IbvEventType.Element.PORT || port < 1 || port > attr.physPortCnt()) {
            return;
        }
        var l = portListener;
        if (l != null) {
            l.portEvent(port, type);
        }
        IbvAsyncEvent e = IbvAsyncEvent.ofPort(type, port);
        for (UContext c : contexts) {
            c.asyncEvent(e);
        }
    }

    @Override
    public String name() {
        return ops.name();
    }

    @Override
    public long nodeGuid() {
        return ops.nodeGuid();
    }

    @Override
    public String driver() {
        return ops.driver();
    }

    /** The driver's device. */
    public IbDeviceOps ops() {
        return ops;
    }

    /** {@code ib_device_get_netdev}: the driver's answer, the port checked against the device's count first. */
    @Override
    public org.peerdirect.ib.core.verbs.IbvNetdev netdev(int port) {
        alive();
        int n = ops.queryDevice().physPortCnt();
        if (port < 1 || port > n) {
            throw new KernelException(Errno.EINVAL, name() + ": port " + port + " does not exist (1.." + n + ")");
        }
        return ops.getNetdev(port);
    }

    @Override
    public IbvContext open(AddressSpace process) {
        if (process == null || process.exited()) {
            throw new KernelException(Errno.EINVAL, name() + ": ibv_open_device needs a live process");
        }
        UContext c;
        synchronized (this) {
            alive();
            IbUcontextOps u = ops.allocUcontext(process);
            c = new UContext(this, process, u);
            contexts.add(c);
        }
        try {
            process.openFile(c); // the process's exit closes the context (uverbs file release)
        } catch (KernelException e) {
            c.close();
            throw e;
        }
        return c;
    }

    void closed(UContext c) {
        contexts.remove(c);
    }

    void alive() {
        if (removed) {
            throw removedError();
        }
    }

    KernelException removedError() {
        return new KernelException(Errno.EIO, "device " + name() + " was removed");
    }

    @Override
    public boolean removed() {
        return removed;
    }

    /** The contexts open now (a copy-on-write list: iterate freely). */
    List<UContext> contexts() {
        return contexts;
    }

    /** Contexts open now. */
    public int openContexts() {
        return contexts.size();
    }

    /**
     * {@code ib_uverbs_remove_one} / disassociate: from now on every verb fails with EIO; channel
     * waiters wake with EIO; every MR is deregistered (its memory goes back, its key is revoked);
     * QPs move to the error state. Objects stay for their owners to destroy. Idempotent.
     */
    public void disassociate() {
        synchronized (this) {
            if (removed) {
                return;
            }
            removed = true;
        }
        ops.setEventHandler(null);
        for (UContext c : contexts) {
            c.disassociate();
        }
    }

    @Override
    public String toString() {
        return name();
    }
}
