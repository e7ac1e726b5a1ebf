package org.peerdirect.ib.core.peer;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.kernel.dma.SgTable;

/**
 * A client that records every callback the core makes and forwards it to a real client, with
 * hooks to make a callback fail. Its own name, so two can wrap the same memory.
 */
class Recording implements PeerMemoryClient {

    final String name;
    final PeerMemoryClient inner;
    final List<String> calls = new CopyOnWriteArrayList<>();
    volatile RuntimeException failGetPages;
    volatile RuntimeException failDmaMap;
    volatile RuntimeException failAcquire;
    volatile SgTable badTable;
    /** Set by a test once unregister returned: any callback after it is recorded here. */
    volatile boolean unregistered;
    final AtomicInteger callsAfterUnregister = new AtomicInteger();
    volatile PeerMemoryRegistration registration;

    Recording(String name, PeerMemoryClient inner) {
        this.name = name;
        this.inner = inner;
    }

    private void rec(String c) {
        if (unregistered) {
            callsAfterUnregister.incrementAndGet();
        }
        calls.add(c);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String version() {
        return "2.1";
    }

    @Override
    public int flags() {
        return inner.flags();
    }

    @Override
    public void registered(PeerMemoryRegistration r) {
        registration = r;
        inner.registered(r);
    }

    @Override
    public Object acquire(int pid, long addr, long size) {
        rec("acquire");
        if (failAcquire != null) {
            throw failAcquire;
        }
        return inner.acquire(pid, addr, size);
    }

    @Override
    public void getPages(long addr, long size, boolean write, boolean force, Object ctx, long coreContext) {
        rec("getPages");
        if (failGetPages != null) {
            throw failGetPages;
        }
        inner.getPages(addr, size, write, force, ctx, coreContext);
    }

    @Override
    public SgTable dmaMap(Object ctx, DmaDevice device) {
        rec("dmaMap");
        if (failDmaMap != null) {
            throw failDmaMap;
        }
        SgTable t = inner.dmaMap(ctx, device);
        return badTable != null ? badTable : t;
    }

    @Override
    public void dmaUnmap(SgTable sg, Object ctx, DmaDevice device) {
        rec("dmaUnmap");
        inner.dmaUnmap(sg, ctx, device);
    }

    @Override
    public void putPages(SgTable sg, Object ctx) {
        rec("putPages");
        inner.putPages(sg, ctx);
    }

    @Override
    public long getPageSize(Object ctx) {
        rec("getPageSize");
        return inner.getPageSize(ctx);
    }

    @Override
    public void release(Object ctx) {
        rec("release");
        inner.release(ctx);
    }
}
