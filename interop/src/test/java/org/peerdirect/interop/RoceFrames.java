package org.peerdirect.interop;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.CRC32;

/**
 * The test's own reading of RoCEv2 frames as rxe puts them on the wire ({@code reference/ROCE_WIRE.md}
 * §5.1-5.3): Ethernet, IPv4 (20 bytes), UDP to 4791, BTH and the rest, the ICRC last. Independent
 * of the engine's encoder on purpose: a frame both agree on was not checked against itself.
 */
final class RoceFrames {

    static final int ETH = 14;
    static final int ROCE_PORT = 4791;

    private RoceFrames() {
    }

    /** One decoded RoCEv2 frame: the headers a test asserts on, and whether the ICRC and the IP checksum hold. */
    record Roce(int srcIp, int dstIp, int ipId, boolean df, int srcPort, int udpChecksum, int opcode, int padCount, int pkey, int destQp,
            boolean ackReq, int psn, int payloadLen, boolean icrcOk, boolean ipChecksumOk) {
    }

    static boolean isArp(byte[] f) {
        return f.length >= 42 && (f[12] & 0xff) == 0x08 && f[13] == 0x06;
    }

    /** The RoCEv2 frame in {@code f}, or null for anything else (ARP, IPv6, other UDP). */
    static Roce decode(byte[] f) {
        ByteBuffer b = ByteBuffer.wrap(f).order(ByteOrder.BIG_ENDIAN);
        if (f.length < ETH + 20 + 8 + 12 + 4 || b.getShort(12) != 0x0800 || (f[ETH] & 0xf0) != 0x40) {
            return null;
        }
        int ihl = (f[ETH] & 0x0f) * 4;
        int totLen = b.getShort(ETH + 2) & 0xffff;
        if (f[ETH + 9] != 17 || (b.getShort(ETH + ihl + 2) & 0xffff) != ROCE_PORT || ETH + totLen > f.length) {
            return null;
        }
        int udp = ETH + ihl;
        int bth = udp + 8;
        int icrcAt = ETH + totLen - 4;
        int stored = ByteBuffer.wrap(f, icrcAt, 4).order(ByteOrder.LITTLE_ENDIAN).getInt();
        int pad = (f[bth + 1] >> 4) & 3;
        return new Roce(b.getInt(ETH + 12), b.getInt(ETH + 16), b.getShort(ETH + 4) & 0xffff, (f[ETH + 6] & 0x40) != 0, b.getShort(udp) & 0xffff,
                b.getShort(udp + 6) & 0xffff, f[bth] & 0xff, pad, b.getShort(bth + 2) & 0xffff, b.getInt(bth + 4) & 0xffffff,
                (f[bth + 8] & 0x80) != 0, b.getInt(bth + 8) & 0xffffff, icrcAt - bth - 12 - pad - extLen(f[bth] & 0xff), stored == icrc(f, ETH, totLen),
                ipChecksum(f, ETH, ihl) == 0);
    }

    /** Bytes of the extension headers after the BTH of the opcodes the tests see (ROCE_WIRE §5.2). */
    static int extLen(int opcode) {
        return switch (opcode) {
            case 0x03, 0x05, 0x09 -> 4; // ImmDt (SEND_LAST/ONLY_IMM), WRITE_LAST_IMM
            case 0x06, 0x0a, 0x0c -> 16; // RETH
            case 0x0b -> 20; // RETH + ImmDt
            case 0x0d, 0x0f, 0x10, 0x11 -> 4; // AETH
            case 0x12 -> 12; // AETH + AtomicAckETH
            case 0x13, 0x14 -> 28; // AtomicETH
            case 0x64 -> 8; // DETH
            case 0x65 -> 12; // DETH + ImmDt
            default -> 0;
        };
    }

    /**
     * The ICRC of the IPv4 packet at {@code ip} of {@code totLen} bytes (ROCE_WIRE §5.3, rxe_icrc.c):
     * CRC-32 over 8 bytes of 0xFF, the IP header with TOS, TTL and checksum masked, the UDP header
     * with its checksum masked, the BTH with byte 4 masked, the rest but the ICRC.
     */
    static int icrc(byte[] f, int ip, int totLen) {
        int ihl = (f[ip] & 0x0f) * 4;
        byte[] m = new byte[totLen - 4];
        System.arraycopy(f, ip, m, 0, m.length);
        m[1] = (byte) 0xff;
        m[8] = (byte) 0xff;
        m[10] = (byte) 0xff;
        m[11] = (byte) 0xff;
        m[ihl + 6] = (byte) 0xff;
        m[ihl + 7] = (byte) 0xff;
        m[ihl + 8 + 4] = (byte) 0xff;
        CRC32 c = new CRC32();
        c.update(new byte[] {-1, -1, -1, -1, -1, -1, -1, -1});
        c.update(m);
        return (int) c.getValue();
    }

    /** The ones'-complement sum of the IPv4 header: 0 when its checksum is right. */
    static int ipChecksum(byte[] f, int ip, int ihl) {
        int s = 0;
        for (int i = 0; i < ihl; i += 2) {
            s += ((f[ip + i] & 0xff) << 8) | (f[ip + i + 1] & 0xff);
        }
        while ((s >> 16) != 0) {
            s = (s & 0xffff) + (s >> 16);
        }
        return ~s & 0xffff;
    }

    /** The ARP reply of {@code mac}/{@code ip} to the request {@code req}, or null when it asks for another address. */
    static byte[] arpReply(byte[] req, byte[] mac, byte[] ip) {
        if (!isArp(req) || req[21] != 1 || req[38] != ip[0] || req[39] != ip[1] || req[40] != ip[2] || req[41] != ip[3]) {
            return null;
        }
        ByteBuffer r = ByteBuffer.allocate(42);
        r.put(req, 6, 6).put(mac).putShort((short) 0x0806); // to the asker, from us
        r.putShort((short) 1).putShort((short) 0x0800).put((byte) 6).put((byte) 4).putShort((short) 2);
        r.put(mac).put(ip).put(req, 22, 6).put(req, 28, 4); // sender: us; target: the asker's MAC and IP
        return r.array();
    }

    /** The frames of a classic pcap (QEMU's filter-dump writes one); a record cut short at the end is left out. */
    static List<byte[]> readPcap(Path file) throws IOException {
        byte[] d = Files.readAllBytes(file);
        List<byte[]> out = new java.util.ArrayList<>();
        if (d.length < 24) {
            return out;
        }
        ByteOrder o = ByteBuffer.wrap(d, 0, 4).order(ByteOrder.LITTLE_ENDIAN).getInt() == 0xa1b2c3d4 ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN;
        for (int at = 24; at + 16 <= d.length;) {
            int len = ByteBuffer.wrap(d, at + 8, 4).order(o).getInt();
            if (len < 0 || at + 16 + len > d.length) {
                break;
            }
            out.add(java.util.Arrays.copyOfRange(d, at + 16, at + 16 + len));
            at += 16 + len;
        }
        return out;
    }

    /** Writes {@code frames} as a classic pcap (Ethernet link type), the format tshark and QEMU's filter-dump share. */
    static void writePcap(Path file, List<byte[]> frames) throws IOException {
        try (OutputStream o = Files.newOutputStream(file)) {
            ByteBuffer h = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            h.putInt(0xa1b2c3d4).putShort((short) 2).putShort((short) 4).putInt(0).putInt(0).putInt(65535).putInt(1);
            o.write(h.array());
            long t = System.currentTimeMillis() * 1000;
            for (byte[] f : frames) {
                ByteBuffer r = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
                r.putInt((int) (t / 1_000_000)).putInt((int) (t % 1_000_000)).putInt(f.length).putInt(f.length);
                o.write(r.array());
                o.write(f);
                t++;
            }
        }
    }
}
