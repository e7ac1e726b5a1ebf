package org.peerdirect.ib.core.jfr;

import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * A registered peer-memory client as the core calls it: each callback goes to the client, and
 * when a recording has {@link IbCoreEvents.PeerClientCallback} enabled it is recorded with its
 * duration and outcome. Wrapped once at registration, so every place the core calls a client
 * is covered; when not recording a callback costs one enabled-flag read.
 */
public final class TracedPeerClient implements PeerMemoryClient {

    private final PeerMemoryClient c;
    private final String name;

    private TracedPeerClient(PeerMemoryClient c, String name) {
        this.c = c;
        this.name = name;
    }

    /** {@code c} with its callbacks recorded; {@code name} is the name it registered with. */
    public static PeerMemoryClient of(PeerMemoryClient c, String name) {
        return new TracedPeerClient(c, name);
    }

    @Override
    public String name() {
        return c.name();
    }

    @Override
    public String version() {
        return c.version();
    }

    @Override
    public int flags() {
        return c.flags();
    }

    @Override
    public void registered(PeerMemoryRegistration registration) {
        c.registered(registration);
    }

    @Override
    public Object acquire(int pid, long addr, long size) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            return c.acquire(pid, addr, size);
        }
        String outcome = "threw";
        try {
            Object ctx = c.acquire(pid, addr, size);
            outcome = ctx != null ? "claimed" : "not mine";
            return ctx;
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "acquire", addr, size, outcome);
        }
    }

    @Override
    public void getPages(long addr, long size, boolean write, boolean force, Object clientContext, long coreContext) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            c.getPages(addr, size, write, force, clientContext, coreContext);
            return;
        }
        String outcome = "threw";
        try {
            c.getPages(addr, size, write, force, clientContext, coreContext);
            outcome = "ok";
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "get_pages", addr, size, outcome);
        }
    }

    @Override
    public SgTable dmaMap(Object clientContext, DmaDevice device) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            return c.dmaMap(clientContext, device);
        }
        String outcome = "threw";
        long bytes = 0;
        try {
            SgTable sg = c.dmaMap(clientContext, device);
            outcome = sg == null ? "no table" : "ok";
            bytes = sg == null ? 0 : sg.totalLength();
            return sg;
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "dma_map", 0, bytes, outcome);
        }
    }

    @Override
    public void dmaUnmap(SgTable sg, Object clientContext, DmaDevice device) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            c.dmaUnmap(sg, clientContext, device);
            return;
        }
        String outcome = "threw";
        try {
            c.dmaUnmap(sg, clientContext, device);
            outcome = "ok";
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "dma_unmap", 0, sg == null ? 0 : sg.totalLength(), outcome);
        }
    }

    @Override
    public void putPages(SgTable sg, Object clientContext) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            c.putPages(sg, clientContext);
            return;
        }
        String outcome = "threw";
        try {
            c.putPages(sg, clientContext);
            outcome = "ok";
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "put_pages", 0, sg == null ? 0 : sg.totalLength(), outcome);
        }
    }

    @Override
    public long getPageSize(Object clientContext) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            return c.getPageSize(clientContext);
        }
        String outcome = "threw";
        long size = 0;
        try {
            size = c.getPageSize(clientContext);
            outcome = "ok";
            return size;
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "get_page_size", 0, size, outcome);
        }
    }

    @Override
    public void release(Object clientContext) {
        IbCoreEvents.PeerClientCallback e = IbCoreEvents.PeerClientCallback.start();
        if (e == null) {
            c.release(clientContext);
            return;
        }
        String outcome = "threw";
        try {
            c.release(clientContext);
            outcome = "ok";
        } catch (RuntimeException | Error x) {
            outcome = x.toString();
            throw x;
        } finally {
            IbCoreEvents.PeerClientCallback.done(e, name, "release", 0, 0, outcome);
        }
    }

    @Override
    public String toString() {
        return c.toString();
    }
}
