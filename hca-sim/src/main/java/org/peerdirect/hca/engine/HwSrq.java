package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/** A shared receive queue. */
public final class HwSrq implements IbvSrq {

    final HcaDevice dev;
    final int pdn;
    final RecvQueue rq;
    final AtomicInteger users = new AtomicInteger();
    volatile boolean dead;

    HwSrq(HcaDevice dev, int pdn, int maxWr, int maxSge) {
        this.dev = dev;
        this.pdn = pdn;
        this.rq = new RecvQueue(maxWr, maxSge);
    }

    @Override
    public void postRecv(IbvRecvWr wr) {
        dev.alive();
        if (dead) {
            throw new KernelException(Errno.EIO, "SRQ: its device " + dev.name + " was removed by its driver");
        }
        rq.lock.lock();
        try {
            rq.postLocked(wr, dev.name, -1);
        } finally {
            rq.lock.unlock();
        }
    }

    /** Guarded by the device monitor. */
    boolean destroyed;

    @Override
    public void destroy() {
        synchronized (dev) {
            if (users.get() > 0) {
                throw new KernelException(Errno.EBUSY, "SRQ is still used by " + users.get() + " QP(s)");
            }
            destroyed = true;
            dev.destroyed(this);
        }
    }
}
