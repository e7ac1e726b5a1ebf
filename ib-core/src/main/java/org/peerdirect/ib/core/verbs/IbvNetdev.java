package org.peerdirect.ib.core.verbs;

/**
 * The network device behind an Ethernet (RoCE) port, as {@code rdma link show} shows it (the
 * nldev answer built from {@code ib_device_get_netdev}: the netdev's name and state) with what
 * {@code ip -d addr show} adds for it: the link's kind, MAC, MTU, IPv4 address and, for a tunnel,
 * its local and remote ends. Read-only; a fresh answer per call.
 *
 * @param name the netdev's name (predictable PCI naming, e.g. {@code enp3s0f0np0})
 * @param kind {@code fabric} (the in-JVM fabric: no addresses) or {@code udp} (a UDP tunnel of Ethernet frames)
 * @param up the link's operational state ({@code operstate} UP, else DOWN)
 * @param mac the MAC in the low 48 bits (0: none)
 * @param mtu the Ethernet MTU (0: none)
 * @param ipv4 the port's IPv4 address (0: none)
 * @param local the tunnel's local end {@code host:port}, or null
 * @param remote the tunnel's remote end {@code host:port}, or null
 * @since 0.14
 */
public record IbvNetdev(String name, String kind, boolean up, long mac, int mtu, int ipv4, String local, String remote) {

    /** {@code UP} or {@code DOWN}, as {@code operstate}. */
    public String state() {
        return up ? "UP" : "DOWN";
    }

    /** {@code aa:bb:cc:dd:ee:ff}. */
    public String macString() {
        StringBuilder b = new StringBuilder();
        for (int i = 5; i >= 0; i--) {
            b.append(String.format("%02x", (mac >>> (8 * i)) & 0xFF));
            if (i > 0) {
                b.append(':');
            }
        }
        return b.toString();
    }

    /** Dotted quad of {@link #ipv4}. */
    public String ipString() {
        return (ipv4 >>> 24) + "." + (ipv4 >>> 16 & 0xFF) + "." + (ipv4 >>> 8 & 0xFF) + "." + (ipv4 & 0xFF);
    }
}
