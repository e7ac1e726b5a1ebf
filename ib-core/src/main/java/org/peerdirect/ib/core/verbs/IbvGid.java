package org.peerdirect.ib.core.verbs;

import java.util.HexFormat;

/**
 * {@code union ibv_gid} in text and in bytes: the 16 bytes of a GID in network order, and the
 * text {@link IbvContext#queryGid} returns (eight groups of four hex digits, as
 * {@code /sys/class/infiniband/<dev>/ports/<n>/gids/<i>} shows it).
 */
public final class IbvGid {

    private IbvGid() {
    }

    /**
     * The 16 bytes of a GID given as eight colon-separated groups of four hex digits.
     *
     * @throws IllegalArgumentException naming the text when it is not such a GID
     */
    public static byte[] parse(String text) {
        String[] g = text == null ? new String[0] : text.split(":", -1);
        if (g.length != 8) {
            throw new IllegalArgumentException("GID '" + text + "': expected eight groups of four hex digits separated by ':'");
        }
        byte[] b = new byte[16];
        for (int i = 0; i < 8; i++) {
            if (g[i].length() != 4 || !g[i].chars().allMatch(c -> Character.digit(c, 16) >= 0)) {
                throw new IllegalArgumentException("GID '" + text + "': group " + i + " '" + g[i] + "' is not four hex digits");
            }
            int v = Integer.parseInt(g[i], 16);
            b[2 * i] = (byte) (v >>> 8);
            b[2 * i + 1] = (byte) v;
        }
        return b;
    }

    /** The text form of 16 GID bytes. */
    public static String format(byte[] gid) {
        if (gid == null || gid.length != 16) {
            throw new IllegalArgumentException("a GID is 16 bytes, not " + (gid == null ? "null" : gid.length));
        }
        StringBuilder sb = new StringBuilder(39);
        HexFormat h = HexFormat.of();
        for (int i = 0; i < 16; i += 2) {
            sb.append(i == 0 ? "" : ":").append(h.toHexDigits(gid[i])).append(h.toHexDigits(gid[i + 1]));
        }
        return sb.toString();
    }
}
