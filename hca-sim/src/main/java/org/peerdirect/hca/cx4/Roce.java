package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * RoCE v2 addressing of the Ethernet personality: a port's GID is its IPv4 address in the
 * IPv4-mapped IPv6 form ({@code ::ffff:a.b.c.d}, as {@code rdma_gid2ip} reads it), and the
 * simulated L3 network gives the port behind fabric endpoint {@code n} the address
 * {@code 10.0.n>>8.n&0xff}. Routing a packet by its destination GID is therefore finding that
 * endpoint: what an Ethernet switch and ARP do for a real RoCE port.
 */
final class Roce {

    private Roce() {
    }

    /** The port's IPv4 address (host order) for fabric endpoint {@code lid}. */
    static int ipOf(int lid) {
        return 10 << 24 | lid & 0xffff;
    }

    /** The 16-byte GID for fabric endpoint {@code lid}. */
    static byte[] gidOf(int lid) {
        byte[] g = new byte[16];
        g[10] = (byte) 0xff;
        g[11] = (byte) 0xff;
        int ip = ipOf(lid);
        g[12] = (byte) (ip >>> 24);
        g[13] = (byte) (ip >>> 16);
        g[14] = (byte) (ip >>> 8);
        g[15] = (byte) ip;
        return g;
    }

    /** The fabric endpoint a destination GID routes to, or 0 (unroutable: not an address of the simulated network). */
    static int lidOfGid(MemorySegment s, long off) {
        for (int i = 0; i < 10; i++) {
            if (s.get(ValueLayout.JAVA_BYTE, off + i) != 0) {
                return 0;
            }
        }
        if (s.get(ValueLayout.JAVA_BYTE, off + 10) != (byte) 0xff || s.get(ValueLayout.JAVA_BYTE, off + 11) != (byte) 0xff
                || s.get(ValueLayout.JAVA_BYTE, off + 12) != 10 || s.get(ValueLayout.JAVA_BYTE, off + 13) != 0) {
            return 0;
        }
        return (s.get(ValueLayout.JAVA_BYTE, off + 14) & 0xff) << 8 | s.get(ValueLayout.JAVA_BYTE, off + 15) & 0xff;
    }
}
