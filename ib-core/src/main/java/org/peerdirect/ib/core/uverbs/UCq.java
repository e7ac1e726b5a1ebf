package org.peerdirect.ib.core.uverbs;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * {@code struct ib_cq} as the core owns it: the driver's CQ, its channel, and its use count (QPs
 * attached; destroy is EBUSY while non-zero). Poll goes straight to the driver.
 */
final class UCq implements IbvCq, IbCqEvents {

    final UContext ctx;
    final IbCqOps ops;
    private final UCompChannel channel;
    /** QPs using the CQ ({@code ib_cq.usecnt}); changed under the context's PD monitors, read at destroy. */
    final AtomicInteger usecnt = new AtomicInteger();
    private final AtomicBoolean destroyed = new AtomicBoolean();

    UCq(UContext ctx, int cqe, UCompChannel channel) {
        this.ctx = ctx;
        this.channel = channel;
        this.ops = ctx.ops.createCq(cqe, this);
    }

    @Override
    public int poll(int n, IbvWc[] wc) {
        return ops.poll(n, wc);
    }

    @Override
    public void reqNotify(boolean solicitedOnly) {
        ctx.alive();
        ops.reqNotify(solicitedOnly);
    }

    @Override
    public IbvCompChannel channel() {
        return channel;
    }

    @Override
    public int cqe() {
        return ops.cqe();
    }

    @Override
    public void completion() {
        if (channel != null) {
            channel.signal(this);
        }
    }

    @Override
    public void error() {
        ctx.asyncEvent(IbvAsyncEvent.of(IbvEventType.CQ_ERR, this));
        if (channel != null) {
            channel.signal(this); // the waiter wakes and its poll reports the error
        }
    }

    boolean destroyed() {
        return destroyed.get();
    }

    /** {@code ibv_destroy_cq}: EBUSY while a QP uses it; idempotent. */
    @Override
    public void destroy() {
        synchronized (ctx) {
            if (destroyed.get()) {
                return; // idempotent: destroyed before (by the user or the context's close)
            }
            if (usecnt.get() > 0) {
                throw new KernelException(Errno.EBUSY, "ibv_destroy_cq: CQ is still used by " + usecnt.get() + " QP(s): destroy them first");
            }
            destroyed.set(true);
        }
        ops.destroyCq();
        ctx.cqs.remove(this);
    }

    /** Context close: the QPs are gone by now. */
    void destroyQuietly() {
        if (destroyed.compareAndSet(false, true)) {
            ops.destroyCq();
        }
    }
}
