package org.peerdirect.hca.wire;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.DatagramChannel;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A UDP tunnel of Ethernet frames, one frame per datagram: QEMU's {@code -netdev socket,udp=}
 * format, so a QEMU guest's NIC and another peerdirect container are both valid peers. Bound to
 * {@code local}; every frame goes to {@code remote}; datagrams from anywhere else are ignored (a
 * stray sender on the same port is no peer).
 *
 * <p>Threads: one platform receive thread, blocked in {@link DatagramChannel#receive}, runs the
 * port's receiver; senders call {@link #send} from any thread (the channel serialises them).
 */
public final class UdpTunnelLink implements Link {

    private final DatagramChannel ch;
    private final InetSocketAddress local;
    private final InetSocketAddress remote;
    private final AtomicLong lost = new AtomicLong();
    private final AtomicLong strays = new AtomicLong();
    private volatile Thread rx;
    private final String name;

    public UdpTunnelLink(String name, InetSocketAddress local, InetSocketAddress remote) {
        this.name = name;
        this.local = local;
        this.remote = remote;
        try {
            ch = DatagramChannel.open();
            ch.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            ch.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            ch.bind(local);
        } catch (IOException e) {
            throw new IllegalStateException(name + ": cannot bind the UDP tunnel to " + local + ": " + e.getMessage()
                    + " (is another container or QEMU using that port?)", e);
        }
    }

    private UdpTunnelLink(String name, DatagramChannel ch, InetSocketAddress remote) throws IOException {
        this.name = name;
        this.ch = ch;
        this.local = (InetSocketAddress) ch.getLocalAddress();
        this.remote = remote;
    }

    /**
     * Two tunnel ends on the loopback, each sending to the other (ports chosen by the system): a
     * cable between two ports of this JVM, or of a test.
     */
    public static UdpTunnelLink[] pair(String nameA, String nameB) {
        try {
            DatagramChannel a = DatagramChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            DatagramChannel b = DatagramChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            for (DatagramChannel c : new DatagramChannel[] {a, b}) {
                c.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
                c.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            }
            return new UdpTunnelLink[] {new UdpTunnelLink(nameA, a, (InetSocketAddress) b.getLocalAddress()),
                    new UdpTunnelLink(nameB, b, (InetSocketAddress) a.getLocalAddress())};
        } catch (IOException e) {
            throw new IllegalStateException("cannot open a UDP tunnel pair on 127.0.0.1: " + e.getMessage(), e);
        }
    }

    /** Parses {@code host:port}; a clear error naming the value otherwise. */
    public static InetSocketAddress address(String what, String hostPort) {
        int c = hostPort == null ? -1 : hostPort.lastIndexOf(':');
        if (c <= 0) {
            throw new IllegalArgumentException(what + " '" + hostPort + "' is not host:port");
        }
        int port;
        try {
            port = Integer.parseInt(hostPort.substring(c + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(what + " '" + hostPort + "': the port is not a number");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException(what + " '" + hostPort + "': the port is not 1..65535");
        }
        return new InetSocketAddress(hostPort.substring(0, c), port);
    }

    /** The address the socket is bound to (the port chosen when {@code local} asked for 0). */
    public InetSocketAddress localAddress() {
        try {
            return (InetSocketAddress) ch.getLocalAddress();
        } catch (IOException e) {
            return local;
        }
    }

    @Override
    public InetSocketAddress localEnd() {
        return localAddress();
    }

    @Override
    public InetSocketAddress remoteEnd() {
        return remote;
    }

    @Override
    public void start(Receiver r) {
        Thread t = new Thread(() -> receiveLoop(r), "wire-rx " + name);
        t.setDaemon(true);
        rx = t;
        t.start();
    }

    private void receiveLoop(Receiver r) {
        Frame f = new Frame();
        while (ch.isOpen()) {
            try {
                f.buf.clear();
                var from = ch.receive(f.buf);
                if (from == null) {
                    continue;
                }
                if (!from.equals(remote)) {
                    strays.incrementAndGet();
                    continue;
                }
                f.len = f.buf.position();
                f.buf.clear();
                r.frame(f);
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                lost.incrementAndGet(); // an ICMP error surfacing on receive: keep receiving
            } catch (RuntimeException e) {
                // the receiver must never take the link down with it: the frame is lost
                lost.incrementAndGet();
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, name + ": a received frame failed", e);
            }
        }
    }

    @Override
    public boolean send(Frame f) {
        try {
            ch.send(f.toSend(), remote);
            return true;
        } catch (IOException e) {
            lost.incrementAndGet();
            return false;
        } finally {
            f.buf.clear();
        }
    }

    @Override
    public String describe() {
        return "udp " + localAddress().getHostString() + ":" + localAddress().getPort() + " -> " + remote.getHostString() + ":"
                + remote.getPort();
    }

    @Override
    public long lost() {
        return lost.get();
    }

    /** Datagrams from another address than {@code remote}, ignored. */
    public long strays() {
        return strays.get();
    }

    @Override
    public void close() {
        try {
            ch.close();
        } catch (IOException e) {
            // closing: nothing left to do
        }
        Thread t = rx;
        if (t != null && t != Thread.currentThread()) {
            try {
                t.join(5000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
