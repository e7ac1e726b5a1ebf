package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A completion queue: a ring of preallocated completions the device fills and {@link #poll}
 * drains. Full when {@code cqe} completions wait: one more is a CQ overrun, which puts the CQ in
 * error (poll returns -1) and the QP that caused it in the error state, as the hardware does.
 *
 * <p>Lock rules: {@link #lock} (a leaf: nothing is called while holding it except the channel's
 * own leaf lock) guards the ring, the arming and the error flag.
 */
public final class HwCq implements IbvCq {

    final HcaDevice dev;
    private final HwCompChannel channel;
    private final IbvWc[] ring;
    private final ReentrantLock lock = new ReentrantLock();
    private int head;
    private int count;
    private boolean armed;
    private boolean solicitedOnly;
    private boolean error;
    private boolean destroyed;
    final AtomicInteger users = new AtomicInteger();
    /** Its driver reset the device: verbs fail with EIO (poll still drains the flushed completions). */
    volatile boolean dead;

    HwCq(HcaDevice dev, int cqe, HwCompChannel channel) {
        this.dev = dev;
        this.channel = channel;
        this.ring = new IbvWc[cqe];
        for (int i = 0; i < cqe; i++) {
            ring[i] = new IbvWc();
        }
    }

    /**
     * The device writes a completion. Returns false on overrun (the CQ is then in error and the
     * completion is lost).
     */
    boolean push(long wrId, IbvWcStatus status, IbvWcOpcode opcode, int byteLen, int imm, int flags, int qpNum, int srcQp,
            int slid, boolean solicited) {
        boolean notify;
        lock.lock();
        try {
            if (destroyed) {
                return true; // a destroyed CQ swallows late completions of destroyed QPs
            }
            if (error) {
                return false;
            }
            if (count == ring.length) {
                error = true;
                dev.cqOverruns.incrementAndGet();
                notify = channel != null;
                if (notify) {
                    channel.signal(this);
                }
                return false;
            }
            IbvWc wc = ring[(head + count) % ring.length];
            wc.wrId = wrId;
            wc.status = status;
            wc.opcode = opcode;
            wc.byteLen = byteLen;
            wc.immData = imm;
            wc.wcFlags = flags;
            wc.qpNum = qpNum;
            wc.srcQp = srcQp;
            wc.slid = slid;
            wc.vendorErr = status == IbvWcStatus.SUCCESS ? 0 : 0x51 + status.ordinal();
            count++;
            notify = armed && (!solicitedOnly || solicited || status != IbvWcStatus.SUCCESS);
            if (notify) {
                armed = false;
            }
        } finally {
            lock.unlock();
        }
        if (notify && channel != null) {
            channel.signal(this);
        }
        return true;
    }

    @Override
    public int poll(int n, IbvWc[] wc) {
        lock.lock();
        try {
            if (error) {
                return -1;
            }
            int k = Math.min(Math.min(n, wc.length), count);
            for (int i = 0; i < k; i++) {
                wc[i].copyFrom(ring[head]);
                head = (head + 1) % ring.length;
            }
            count -= k;
            return k;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void reqNotify(boolean solicited) {
        dev.alive();
        if (dead) {
            throw new KernelException(Errno.EIO, "CQ: its device " + dev.name + " was removed by its driver");
        }
        lock.lock();
        try {
            // completions already waiting are not events; only new ones are (as the hardware arms)
            armed = true;
            solicitedOnly = solicited;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public IbvCompChannel channel() {
        return channel;
    }

    @Override
    public int cqe() {
        return ring.length;
    }

    /** True when the CQ overran. */
    public boolean inError() {
        lock.lock();
        try {
            return error;
        } finally {
            lock.unlock();
        }
    }

    void deviceRemoved() {
        if (channel != null) {
            channel.wakeAll();
        }
    }

    @Override
    public void destroy() {
        // under the device monitor, as createQp: no QP can start using the CQ between check and act
        synchronized (dev) {
            if (users.get() > 0) {
                throw new KernelException(Errno.EBUSY, "CQ is still used by " + users.get() + " QP(s): destroy them first");
            }
            lock.lock();
            try {
                destroyed = true;
            } finally {
                lock.unlock();
            }
            dev.destroyed(this);
        }
    }

    /** Whether {@link #destroy} ran; caller holds the device monitor. */
    boolean destroyedLocked() {
        lock.lock();
        try {
            return destroyed;
        } finally {
            lock.unlock();
        }
    }
}
