package org.peerdirect.rdma.tools;

import java.net.Inet6Address;
import java.net.UnknownHostException;

/** A GID as {@code inet_ntop(AF_INET6)} prints it ({@code ::ffff:10.99.0.1}, {@code fe80::5054:ff:fe00:2}), as the C tools show addresses. */
final class Inet6Text {

    private Inet6Text() {
    }

    static String format(byte[] gid) {
        boolean mapped = true;
        for (int i = 0; i < 10; i++) {
            mapped &= gid[i] == 0;
        }
        mapped &= gid[10] == (byte) 0xff && gid[11] == (byte) 0xff;
        if (mapped) {
            return String.format("::ffff:%d.%d.%d.%d", gid[12] & 0xff, gid[13] & 0xff, gid[14] & 0xff, gid[15] & 0xff);
        }
        try {
            // getByAddress looks no name up; Java prints every group: compress the longest zero run as inet_ntop does
            String full = Inet6Address.getByAddress(null, gid, null).getHostAddress();
            return compress(full);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("a GID is 16 bytes", e);
        }
    }

    private static String compress(String full) {
        String[] g = full.split(":");
        int best = -1;
        int bestLen = 1;
        for (int i = 0; i < g.length;) {
            int j = i;
            while (j < g.length && g[j].equals("0")) {
                j++;
            }
            if (j - i > bestLen) {
                best = i;
                bestLen = j - i;
            }
            i = Math.max(j, i + 1);
        }
        if (best < 0) {
            return String.join(":", g);
        }
        String head = String.join(":", java.util.Arrays.copyOfRange(g, 0, best));
        String tail = String.join(":", java.util.Arrays.copyOfRange(g, best + bestLen, g.length));
        return head + "::" + tail;
    }
}
