package org.peerdirect.interop;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.DatagramChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The host end of the guest's wire for the tests that run before the project's ports have a wire
 * link: a UDP socket on 127.0.0.1 in QEMU's socket-netdev format (one Ethernet frame per
 * datagram). A reader thread answers ARP for {@link RxeGuest#HOST_IP} at all times (the guest
 * resolves its peer while it creates its AH or moves its QP to RTR, before it answers on TCP:
 * ROCE_WIRE §5.4) and keeps every frame, in arrival order, for the test to decode.
 */
final class WireEnd implements AutoCloseable {

    /** The MAC every host end facing the guest answers with ({@link SharedGuest#HOST_MAC}): the guest's neighbour entry outlives a suite. */
    static final byte[] MAC = {0x02, 0x00, 0x0a, 0x63, 0x00, 0x01};
    static final byte[] IP = {10, 99, 0, 1};

    private final DatagramChannel ch;
    private final List<byte[]> frames = new ArrayList<>(); // guarded by itself
    private final Thread reader;
    private volatile InetSocketAddress guest;
    private int arpsAnswered;

    WireEnd() throws IOException {
        this(0);
    }

    /** On 127.0.0.1:{@code port} (the shared guest's {@link SharedGuest#hostWirePort}; 0: any). */
    WireEnd(int port) throws IOException {
        ch = DatagramChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        reader = Thread.ofPlatform().daemon().name("wire-end").start(this::receive);
    }

    /** The UDP port QEMU's NIC sends to ({@code -netdev socket,udp=127.0.0.1:<port>}). */
    int port() {
        return ((InetSocketAddress) ch.socket().getLocalSocketAddress()).getPort();
    }

    /** Where QEMU's NIC listens ({@code localaddr=}): the ARP replies go there. */
    void guest(int guestPort) {
        guest = new InetSocketAddress(InetAddress.getLoopbackAddress(), guestPort);
    }

    private void receive() {
        ByteBuffer b = ByteBuffer.allocate(65536);
        try {
            while (true) {
                b.clear();
                ch.receive(b);
                b.flip();
                byte[] f = new byte[b.remaining()];
                b.get(f);
                byte[] reply = RoceFrames.arpReply(f, MAC, IP);
                InetSocketAddress to = guest;
                if (reply != null && to != null) {
                    ch.send(ByteBuffer.wrap(reply), to);
                }
                synchronized (frames) {
                    frames.add(f);
                    if (reply != null) {
                        frames.add(reply);
                        arpsAnswered++;
                    }
                    frames.notifyAll();
                }
            }
        } catch (ClosedChannelException end) {
            // closed by the test
        } catch (IOException e) {
            System.err.println("wire-end: " + e);
        }
    }

    /** Every frame seen so far (and the ARP replies sent), in order. */
    List<byte[]> frames() {
        synchronized (frames) {
            return List.copyOf(frames);
        }
    }

    int arpsAnswered() {
        synchronized (frames) {
            return arpsAnswered;
        }
    }

    /** Waits until {@code n} RoCEv2 frames arrived; an AssertionError naming them when {@code limit} passes. */
    List<RoceFrames.Roce> awaitRoce(int n, Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        synchronized (frames) {
            while (true) {
                List<RoceFrames.Roce> r = new ArrayList<>();
                for (byte[] f : frames) {
                    RoceFrames.Roce x = RoceFrames.decode(f);
                    if (x != null) {
                        r.add(x);
                    }
                }
                if (r.size() >= n) {
                    return r;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError(String.format("%d RoCEv2 frames did not arrive from the guest within %d s (got %d of %d frames; %d ARP answered)",
                            n, limit.toSeconds(), r.size(), frames.size(), arpsAnswered));
                }
                frames.wait(Math.max(1, Math.min(left / 1_000_000, 500)));
            }
        }
    }

    @Override
    public void close() throws IOException {
        ch.close();
        try {
            reader.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
