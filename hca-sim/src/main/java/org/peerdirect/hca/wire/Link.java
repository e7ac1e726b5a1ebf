package org.peerdirect.hca.wire;

/**
 * What carries a port's Ethernet frames (a netdev's role for rxe): sends one frame, and hands
 * every frame it receives to the port's {@link Receiver} on the link's own receive thread.
 */
public interface Link extends AutoCloseable {

    /** The port's side of the link: called for each frame received, on the link's receive thread, never concurrently. */
    @FunctionalInterface
    interface Receiver {
        void frame(Frame f);
    }

    /** Starts delivering received frames to {@code r}. */
    void start(Receiver r);

    /**
     * Sends the frame's bytes (the frame is the caller's again when this returns). A send that
     * fails (the socket closed, the host unreachable) is a frame lost on the wire: counted, not thrown,
     * and answered false (rxe's {@code send_err}); a frame the link drops as configured went on the wire.
     */
    boolean send(Frame f);

    /** How the link shows itself (rdma:devinfo): its kind and addresses. */
    String describe();

    /**
     * The link's socket address on the host's network ({@code local}) and where its frames go
     * ({@code remote}), for a link that is a tunnel; null for one that has none. The port's
     * link register (PDLNK) reports them, so the driver can show them as {@code ip -d link} shows a
     * tunnel's ends.
     */
    default java.net.InetSocketAddress localEnd() {
        return null;
    }

    /** See {@link #localEnd()}. */
    default java.net.InetSocketAddress remoteEnd() {
        return null;
    }

    /** Frames the link lost sending (socket errors) or dropped as configured. */
    long lost();

    /** Stops the receive thread and releases the socket; idempotent. */
    @Override
    void close();
}
