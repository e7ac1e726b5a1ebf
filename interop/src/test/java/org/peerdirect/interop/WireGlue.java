package org.peerdirect.interop;

import java.lang.reflect.Method;
import java.net.InetSocketAddress;

import org.junit.jupiter.api.Assumptions;
import org.peerdirect.hca.cx4.ConnectX4Device;

/**
 * Puts a ConnectX-6 Dx port on a UDP tunnel of Ethernet frames (issue 44 item 2: hca-sim's wire
 * link, configured in the container by the factory PID {@code org.peerdirect.hca.wire.link}).
 * Found by reflection, so this module builds and its tests skip, saying so, before that link
 * exists: {@code ConnectX4Device.attachWire(port, Link, ip, mac, mtu)} and
 * {@code org.peerdirect.hca.wire.UdpTunnelLink(name, local, remote)}, as the wire's author
 * published them. Once both are merged this is a direct call.
 */
final class WireGlue {

    private WireGlue() {
    }

    /** Skips the calling test, naming why, when the port cannot have a wire link in this build. */
    static void assumeWire() {
        Assumptions.assumeTrue(attachWire() != null && tunnel() != null,
                "the port has no wire link yet: hca-sim has no UDP tunnel link (org.peerdirect.hca.wire.UdpTunnelLink and "
                        + "ConnectX4Device.attachWire, issue 44 item 2); the rxe interop runs once it is merged");
    }

    private static Method attachWire() {
        for (Method m : ConnectX4Device.class.getMethods()) {
            if (m.getName().equals("attachWire") && m.getParameterCount() == 5) {
                return m;
            }
        }
        return null;
    }

    private static Class<?> tunnel() {
        try {
            return Class.forName("org.peerdirect.hca.wire.UdpTunnelLink");
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    /**
     * Port {@code port} of {@code model} on a UDP tunnel: its socket on 127.0.0.1:{@code local},
     * frames sent to 127.0.0.1:{@code remote}, IPv4 address {@code ip} (GID 1 {@code ::ffff:ip}),
     * MAC 02:00 + the address, Ethernet MTU 1500.
     */
    static void attach(ConnectX4Device model, int port, int local, int remote, int ip) throws ReflectiveOperationException {
        assumeWire();
        Class<?> t = tunnel();
        Object link = null;
        for (var c : t.getConstructors()) {
            Class<?>[] p = c.getParameterTypes();
            if (p.length == 3 && p[0] == String.class && p[1] == InetSocketAddress.class && p[2] == InetSocketAddress.class) {
                link = c.newInstance("interop/" + port, new InetSocketAddress("127.0.0.1", local), new InetSocketAddress("127.0.0.1", remote));
            }
        }
        Assumptions.assumeTrue(link != null, "the port has no wire link yet: UdpTunnelLink has no (String, InetSocketAddress, InetSocketAddress) constructor");
        attachWire().invoke(model, port, link, ip, 0x0200_0000_0000L | (ip & 0xFFFF_FFFFL), 1500);
    }

    /**
     * As {@link #attach}, the port's frames leaving through a {@link org.peerdirect.hca.wire.FaultyLink} (no faults
     * until the caller sets them): the conformance suite's fault injection on this side of the wire.
     */
    static org.peerdirect.hca.wire.FaultyLink attachFaulty(ConnectX4Device model, int port, int local, int remote, int ip) {
        assumeWire();
        var link = new org.peerdirect.hca.wire.FaultyLink(new org.peerdirect.hca.wire.UdpTunnelLink("conformance/" + port,
                new InetSocketAddress("127.0.0.1", local), new InetSocketAddress("127.0.0.1", remote)),
                org.peerdirect.hca.wire.FaultyLink.Faults.NONE);
        model.attachWire(port, link, ip, 0x0200_0000_0000L | (ip & 0xFFFF_FFFFL), 1500);
        return link;
    }

    /** The port back on the in-JVM fabric, its tunnel's socket closed ({@code ConnectX4Device.detachWire}); nothing where there is none. */
    static void detach(ConnectX4Device model, int port) throws ReflectiveOperationException {
        for (Method m : ConnectX4Device.class.getMethods()) {
            if (m.getName().equals("detachWire") && m.getParameterCount() == 1) {
                m.invoke(model, port);
            }
        }
    }
}
