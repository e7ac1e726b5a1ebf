package org.peerdirect.ib.core.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Unsigned;

/**
 * The JFR events of ib-core: a peer-memory client's callback, a peer client's invalidation of a
 * registration ({@code ib_invalidate_peer_memory}), and a dma-buf exporter's {@code move_notify}.
 *
 * <p>Cheap when not recording: {@code start()} reads the event type's enabled flag through a
 * shared probe instance and returns null when it is off, so a site allocates nothing and builds
 * no string unless a recording has the event enabled; {@code done} ends, and commits when the
 * recording's threshold lets it.
 */
public final class IbCoreEvents {

    private IbCoreEvents() {
    }

    /** One call of a peer-memory client's callback by the core, with its duration and outcome. */
    @Name("org.peerdirect.PeerClientCallback")
    @Label("Peer Client Callback")
    @Category({"peerdirect", "Peer Memory"})
    @Description("The IB core calling a peer-memory client: acquire, get_pages, dma_map, dma_unmap, put_pages, get_page_size, release")
    public static final class PeerClientCallback extends Event {
        private static final PeerClientCallback PROBE = new PeerClientCallback();

        @Label("Client")
        public String client;

        @Label("Callback")
        @Description("The peer_memory_client member called")
        public String callback;

        @Label("Address")
        @Description("The virtual address asked for (acquire, get_pages), else 0")
        @Unsigned
        public long address;

        @Label("Size")
        @DataAmount
        public long size;

        @Label("Outcome")
        @Description("ok, claimed / not mine (acquire), or the exception the client threw")
        public String outcome;

        public static PeerClientCallback start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            PeerClientCallback e = new PeerClientCallback();
            e.begin();
            return e;
        }

        public static void done(PeerClientCallback e, String client, String callback, long address, long size, String outcome) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.client = client;
                e.callback = callback;
                e.address = address;
                e.size = size;
                e.outcome = outcome;
                e.commit();
            }
        }
    }

    /** A peer client invalidating one registration through its ticket, the driver's stop included. */
    @Name("org.peerdirect.PeerInvalidate")
    @Label("Peer Memory Invalidation")
    @Category({"peerdirect", "Peer Memory"})
    @Description("ib_invalidate_peer_memory for one registration: the driver stops the device's access (its invalidate function), "
            + "then the core unmaps; the duration is the client's wait")
    public static final class PeerInvalidate extends Event {
        private static final PeerInvalidate PROBE = new PeerInvalidate();

        @Label("Client")
        public String client;

        @Label("Ticket")
        @Description("The core context (xa id) the client invalidated by")
        public long ticket;

        @Label("Address")
        @Unsigned
        public long address;

        @Label("Length")
        @DataAmount
        public long length;

        @Label("Driver Called")
        @Description("Whether the driver's invalidate function ran (false: not mapped yet, or already invalidated)")
        public boolean driverCalled;

        public static PeerInvalidate start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            PeerInvalidate e = new PeerInvalidate();
            e.begin();
            return e;
        }

        public static void done(PeerInvalidate e, String client, long ticket, long address, long length, boolean driverCalled) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.client = client;
                e.ticket = ticket;
                e.address = address;
                e.length = length;
                e.driverCalled = driverCalled;
                e.commit();
            }
        }
    }

    /** A dma-buf exporter moving (or revoking) a buffer an MR imported. */
    @Name("org.peerdirect.DmabufMoveNotify")
    @Label("Dma-buf Move Notify")
    @Category({"peerdirect", "Dma-buf"})
    @Description("The exporter's move_notify on an imported dma-buf umem: the driver zaps its translation, the core unmaps "
            + "(dynamic), or a revocable pinned import is revoked")
    public static final class DmabufMoveNotify extends Event {
        private static final DmabufMoveNotify PROBE = new DmabufMoveNotify();

        @Label("Dma-buf")
        public String dmabuf;

        @Label("Offset")
        @DataAmount
        public long offset;

        @Label("Length")
        @DataAmount
        public long length;

        @Label("Pinned")
        @Description("A pinned import (revoked) rather than a dynamic one (unmapped, re-faulted later)")
        public boolean pinned;

        public static DmabufMoveNotify start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            DmabufMoveNotify e = new DmabufMoveNotify();
            e.begin();
            return e;
        }

        public static void done(DmabufMoveNotify e, Object dmabuf, long offset, long length, boolean pinned) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.dmabuf = String.valueOf(dmabuf);
                e.offset = offset;
                e.length = length;
                e.pinned = pinned;
                e.commit();
            }
        }
    }
}
