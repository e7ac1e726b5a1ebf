package org.peerdirect.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.DataInputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.RxeOpcode;
import org.peerdirect.hca.wire.RxePkt;
import org.peerdirect.hca.wire.UdpTunnelLink;

/**
 * A RoCEv2 peer the test drives by hand (as ROCE_WIRE.md's probe did against rxe): it owns an end
 * of a UDP tunnel, answers ARP for its address at all times, builds every frame itself with
 * hca-sim's header classes, and keeps every RoCEv2 frame it receives for the test. It speaks
 * {@code ibv_rc_pingpong}'s out-of-band exchange as a client, so a pingpong server (the rxe
 * guest's or peerdirect's) connects its QP to this peer's made-up QP.
 */
final class HandPeer implements AutoCloseable {

    /** This peer's QPN as it announces it. */
    static final int QPN = 0x99;

    final int ip;
    final long mac;
    private final UdpTunnelLink link;
    private final LinkedBlockingQueue<Frame> got = new LinkedBlockingQueue<>();
    private final Frame tx = new Frame();
    private final long peerMac;
    private final int peerIp;
    /** The server's QPN and expected PSN (the PSN it announced), and the PSN this peer announced. */
    int peerQpn;
    int peerPsn;
    int myPsn;

    /** This peer on 127.0.0.1:{@code local} with {@code ip} and {@code mac}, facing the server's port at {@code remote} ({@code peerIp}, {@code peerMac}). */
    HandPeer(int local, int remote, int ip, long mac, int peerIp, long peerMac) {
        this.ip = ip;
        this.mac = mac;
        this.peerIp = peerIp;
        this.peerMac = peerMac;
        link = new UdpTunnelLink("hand", new InetSocketAddress("127.0.0.1", local), new InetSocketAddress("127.0.0.1", remote));
        link.start(f -> {
            Frame c = new Frame();
            c.copyFrom(f);
            int kind = RxeNet.parse(c, new RxePkt(), mac, ip);
            if (kind == RxeNet.NOT_ROCE || kind == RxeNet.NOT_MINE) {
                return; // the guest's own traffic (IPv6 neighbour discovery, other UDP): not the server's answer
            }
            if (kind == RxeNet.ARP) {
                if (RxeNet.arpOp(c) == 1 && RxeNet.arpTargetIp(c) == ip) {
                    Frame r = new Frame();
                    RxeNet.arp(r, 2, RxeNet.arpSenderMac(c), mac, ip, RxeNet.arpSenderMac(c), RxeNet.arpSenderIp(c));
                    link.send(r);
                }
                return;
            }
            got.add(c);
        });
    }

    /**
     * {@code pp_client_exch_dest} towards a pingpong server on {@code port}: announces QPN
     * {@link #QPN}, PSN {@code psn} and GID {@code ::ffff:ip}; keeps the server's QPN and PSN.
     */
    void exchange(int port, int psn) throws IOException {
        myPsn = psn;
        byte[] gid = new byte[16];
        gid[10] = (byte) 0xff;
        gid[11] = (byte) 0xff;
        gid[12] = (byte) (ip >>> 24);
        gid[13] = (byte) (ip >>> 16);
        gid[14] = (byte) (ip >>> 8);
        gid[15] = (byte) ip;
        String me = String.format("%04x:%06x:%06x:%s", 0, QPN, psn, HexFormat.of().formatHex(gid));
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
                s.setSoTimeout(120_000);
                s.getOutputStream().write(Arrays.copyOf(me.getBytes(StandardCharsets.US_ASCII), 52));
                byte[] rem = new byte[52];
                new DataInputStream(s.getInputStream()).readFully(rem);
                String[] f = new String(rem, StandardCharsets.US_ASCII).trim().replace("\0", "").split(":");
                peerQpn = Integer.parseInt(f[1], 16);
                peerPsn = Integer.parseInt(f[2], 16);
                s.getOutputStream().write(new byte[] {'d', 'o', 'n', 'e', 0});
                return;
            } catch (java.net.ConnectException e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                try {
                    Thread.sleep(50); // the server is another program: poll pace
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new IOException(ie);
                }
            }
        }
    }

    /** Sends a request or acknowledgement packet to the server's QP; {@code corrupt} flips a payload bit after the ICRC. */
    void send(int opcode, int psn, boolean ackReq, byte[] ext, byte[] payload, boolean corrupt) {
        int pad = -payload.length & 3;
        int l4 = RxeHdr.BTH_BYTES + ext.length + payload.length + pad;
        RxeNet.roceHeaders(tx, peerMac, mac, ip, peerIp, 7, RxeNet.udpSport(QPN, peerQpn), l4);
        RxeHdr.bth(tx.seg, RxeNet.BTH, opcode, false, pad, RxeHdr.DEFAULT_PKEY, peerQpn, ackReq, psn & RxeHdr.PSN_MASK);
        MemorySegment.copy(ext, 0, tx.seg, ValueLayout.JAVA_BYTE, RxeNet.BTH + RxeHdr.BTH_BYTES, ext.length);
        MemorySegment.copy(payload, 0, tx.seg, ValueLayout.JAVA_BYTE, RxeNet.BTH + RxeHdr.BTH_BYTES + ext.length, payload.length);
        tx.seg.asSlice(RxeNet.BTH + RxeHdr.BTH_BYTES + ext.length + payload.length, pad).fill((byte) 0);
        RxeNet.seal(tx);
        if (corrupt) {
            int at = RxeNet.BTH + RxeHdr.BTH_BYTES + ext.length;
            tx.seg.set(ValueLayout.JAVA_BYTE, at, (byte) (tx.seg.get(ValueLayout.JAVA_BYTE, at) ^ 1));
        }
        link.send(tx);
    }

    /** An ACKNOWLEDGE with {@code syndrome} and {@code msn} at {@code psn}. */
    void ack(int psn, int syndrome, int msn) {
        send(RxeOpcode.RC_ACKNOWLEDGE, psn, false, new byte[] {(byte) syndrome, (byte) (msn >>> 16), (byte) (msn >>> 8), (byte) msn}, new byte[0],
                false);
    }

    /** A packet the server sent, parsed: opcode, PSN, and for an ACK its AETH (syndrome << 24 | MSN). */
    record Got(int opcode, int psn, int aeth, int payloadLen) {
        int syndrome() {
            return aeth >>> 24;
        }
    }

    /** The next RoCEv2 packet from the server within {@code ms}, or null. */
    Got next(long ms) throws InterruptedException {
        Frame f = got.poll(ms, TimeUnit.MILLISECONDS);
        if (f == null) {
            return null;
        }
        RxePkt p = new RxePkt();
        assertEquals(RxeNet.ROCE, RxeNet.parse(f, p, mac, ip), "the server's frame is RoCEv2 with a good ICRC");
        int aeth = 0;
        if (p.has(RxeOpcode.AETH)) {
            int a = p.hdr(RxeOpcode.AETH);
            aeth = RxeHdr.aethSyndrome(f.seg, a) << 24 | RxeHdr.aethMsn(f.seg, a);
        }
        return new Got(p.opcode, p.psn, aeth, p.payloadLen);
    }

    /** The next packet with {@code opcode} within {@code ms} (others skipped), or null. */
    Got next(int opcode, long ms) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000;
        while (true) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            Got g = next(Math.max(0, left));
            if (g == null || g.opcode == opcode) {
                return g;
            }
        }
    }

    void clear() {
        got.clear();
    }

    static byte[] reth(long va, int rkey, int len) {
        byte[] b = new byte[16];
        RxeHdr.reth(MemorySegment.ofArray(b), 0, va, rkey, len);
        return b;
    }

    @Override
    public void close() {
        link.close();
    }
}
