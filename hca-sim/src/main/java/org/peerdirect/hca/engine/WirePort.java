package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.Link;
import org.peerdirect.hca.wire.Neighbours;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.RxeOpcode;
import org.peerdirect.hca.wire.RxePkt;

/**
 * An Ethernet port's MAC and IP layer when its link is a real wire ({@code rxe_net.c},
 * {@code rxe_recv.c}): its addresses (IPv4, MAC, the GIDs derived from them), its neighbour table
 * and ARP, the frames it sends, and the receive path that checks each frame and hands a RoCEv2
 * packet to the responder ({@link WireResp}: requests) or the completer ({@link WireComp}:
 * acknowledgements and responses) of its QP. A port without one stays on the in-JVM fabric.
 *
 * <p>Threads: the link's receive thread runs {@link #frame} and everything it calls (responder,
 * completer), one frame at a time, with this port's receive scratch ({@link #rxPkt},
 * {@link #rxTx}, {@link #exchange}). Requesters send from their drain threads with their own
 * frames; {@link Link#send} is safe from any thread.
 */
public final class WirePort implements Link.Receiver {

    final HcaDevice dev;
    final HcaPort port;
    final Link link;
    final int ip;
    final long mac;
    /** The Ethernet MTU and the port's active IB MTU in bytes (1500 gives 1024, as rxe's {@code rxe_set_mtu}). */
    final int ethMtu;
    final int activeMtu;
    final Neighbours neighbours = new Neighbours();
    final RxeCounters counters = new RxeCounters();
    private final AtomicInteger ipId = new AtomicInteger();
    // receive-thread scratch
    final RxePkt rxPkt = new RxePkt();
    final Frame rxTx = new Frame();
    final Exchange exchange = new Exchange(java.lang.foreign.Arena.ofAuto(), HcaDevice.MAX_SGE);
    final SendWqe rxWqe = new SendWqe(1, MemorySegment.NULL);

    WirePort(HcaDevice dev, HcaPort port, Link link, int ip, long mac, int ethMtu) {
        this.dev = dev;
        this.port = port;
        this.link = link;
        this.ip = ip;
        this.mac = mac;
        this.ethMtu = ethMtu;
        this.activeMtu = ibMtu(ethMtu);
    }

    /**
     * Puts Ethernet port {@code p} of {@code dev} on a wire: from now on its connected QPs exchange
     * RoCEv2 packets over {@code link} with address {@code ip}, MAC {@code mac} and Ethernet MTU
     * {@code mtu}, instead of the in-JVM fabric. The link starts delivering frames. Configure it
     * before the QPs that use it move to RTR.
     */
    static WirePort attach(HcaDevice dev, HcaPort p, Link link, int ip, long mac, int mtu) {
        if (!dev.ethernet) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": port " + p.portNum
                    + " is InfiniBand: only an Ethernet (RoCE) port goes on a RoCEv2 wire");
        }
        if (mtu < 576 || mtu > 9000) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": Ethernet MTU " + mtu + " is not 576..9000");
        }
        WirePort w = new WirePort(dev, p, link, ip, mac, mtu);
        synchronized (p) {
            if (p.wire != null) {
                throw new HwCommandException(HwCommandException.STAT_BAD_RES_STATE, dev.name + ": port " + p.portNum
                        + " already has a wire (" + p.wire.describe() + ")");
            }
            p.wire = w;
        }
        link.start(w);
        return w;
    }

    /** Takes port {@code p} off its wire (the link closes); its QPs' packets are lost until it is on one again. */
    static void detach(HcaPort p) {
        WirePort w;
        synchronized (p) {
            w = p.wire;
            p.wire = null;
        }
        if (w != null) {
            w.close();
        }
    }

    /** The largest IB MTU (256..4096) whose packets fit the Ethernet MTU with IPv4, UDP, BTH, extension headers and ICRC. */
    static int ibMtu(int ethMtu) {
        int room = ethMtu - RxeNet.IP_BYTES - RxeNet.UDP_BYTES - 12 - 28 - 4;
        int m = 4096;
        while (m > 256 && m > room) {
            m >>= 1;
        }
        return m;
    }

    /** The port's IPv4 address. */
    public int ip() {
        return ip;
    }

    public long mac() {
        return mac;
    }

    /** The Ethernet MTU the port was put on its wire with. */
    public int ethMtu() {
        return ethMtu;
    }

    /** The link carrying the port's frames (its kind and ends for the port's link register). */
    public Link link() {
        return link;
    }

    public int activeMtu() {
        return activeMtu;
    }

    public RxeCounters counters() {
        return counters;
    }

    public Neighbours neighbours() {
        return neighbours;
    }

    public String describe() {
        return link.describe() + " ip " + RxeNet.ipString(ip) + " mac " + RxeNet.macString(mac) + " mtu " + ethMtu + " (ib " + activeMtu + ")";
    }

    /** GID {@code index} of the port as rxe fills it: 0 the link-local EUI-64 of the MAC, 1 {@code ::ffff:ip}. */
    public byte[] gid(int index) {
        byte[] g = new byte[16];
        if (index == 0) {
            g[0] = (byte) 0xfe;
            g[1] = (byte) 0x80;
            g[8] = (byte) ((mac >>> 40 ^ 0x02) & 0xFF);
            g[9] = (byte) (mac >>> 32);
            g[10] = (byte) (mac >>> 24);
            g[11] = (byte) 0xff;
            g[12] = (byte) 0xfe;
            g[13] = (byte) (mac >>> 16);
            g[14] = (byte) (mac >>> 8);
            g[15] = (byte) mac;
        } else {
            mappedGid(g, ip);
        }
        return g;
    }

    static void mappedGid(byte[] g, int ip) {
        java.util.Arrays.fill(g, (byte) 0);
        g[10] = (byte) 0xff;
        g[11] = (byte) 0xff;
        g[12] = (byte) (ip >>> 24);
        g[13] = (byte) (ip >>> 16);
        g[14] = (byte) (ip >>> 8);
        g[15] = (byte) ip;
    }

    /** The IPv4 address of an IPv4-mapped GID, or 0 when the GID is not one. */
    static int ipOfGid(byte[] g) {
        for (int i = 0; i < 10; i++) {
            if (g[i] != 0) {
                return 0;
            }
        }
        if (g[10] != (byte) 0xff || g[11] != (byte) 0xff) {
            return 0;
        }
        return (g[12] & 0xFF) << 24 | (g[13] & 0xFF) << 16 | (g[14] & 0xFF) << 8 | g[15] & 0xFF;
    }

    /**
     * Writes the Ethernet, IPv4 and UDP headers of a packet to {@code dstIp} into {@code f}, the
     * MAC from the neighbour table; false (and an ARP request sent) when the neighbour is not
     * known yet: the packet is lost, the transport's retry finds the entry.
     */
    boolean headers(Frame f, int dstIp, int sport, int l4) {
        long dmac = neighbours.lookup(dstIp);
        if (dmac < 0) {
            arpRequest(f, dstIp);
            return false;
        }
        RxeNet.roceHeaders(f, dmac, mac, ip, dstIp, ipId.getAndIncrement() & 0xFFFF, sport, l4);
        return true;
    }

    /** Seals (ICRC) and sends a frame built by {@link #headers}. */
    void send(Frame f) {
        RxeNet.seal(f);
        counters.inc(RxeCounters.SENT_PKTS);
        int len = f.len;
        port.counters.xmit(len); // before the frame leaves: the peer may answer before send returns
        if (!link.send(f)) {
            counters.inc(RxeCounters.SEND_ERR); // rxe_xmit_packet's failure
            port.counters.discard(len);
        }
    }

    private void arpRequest(Frame f, int dstIp) {
        RxeNet.arp(f, 1, RxeNet.BROADCAST, mac, ip, 0, dstIp);
        counters.inc(RxeCounters.ARP_REQUESTS);
        link.send(f);
    }

    /** How long a QP's move to RTR waits for its peer's ARP reply. */
    static final long RESOLVE_WAIT_NANOS = 100_000_000L;

    /**
     * Resolves {@code dstIp} now, waiting (bounded) for the reply: a QP moving to RTR resolves its
     * peer's MAC, as rxe's modify_qp does through {@code ib_resolve_eth_dmac}. A peer that does
     * not answer delays nothing further: the QP's packets go out once it does, or the QP ends in
     * RETRY_EXC_ERR.
     */
    public void resolve(int dstIp) {
        if (neighbours.lookup(dstIp) < 0) {
            Frame f = new Frame();
            arpRequest(f, dstIp);
            neighbours.await(dstIp, RESOLVE_WAIT_NANOS);
        }
    }

    /** As {@link #headers} to a MAC already known (the requester's, from the request being answered). */
    void headersTo(Frame f, int dstIp, long dstMac, int sport, int l4) {
        RxeNet.roceHeaders(f, dstMac, mac, ip, dstIp, ipId.getAndIncrement() & 0xFFFF, sport, l4);
    }

    /**
     * One received frame ({@code rxe_udp_encap_recv} → {@code rxe_rcv}): ARP is answered and
     * learnt from; a RoCEv2 packet with a good ICRC goes to its QP's responder or completer;
     * everything else is dropped and counted. Never throws on what the wire carried.
     */
    @Override
    public void frame(Frame f) {
        if (dev.removed || !port.active) {
            return; // a port that is down hears nothing
        }
        try {
            receive(f);
        } catch (RuntimeException e) {
            // an engine bug must not take the link down: the frame is lost, the failure counted for the audits
            dev.engineFailures.incrementAndGet();
            System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, dev.name + ": a received frame failed", e);
        }
    }

    private void receive(Frame f) {
        RxePkt p = rxPkt;
        int r = RxeNet.parse(f, p, mac, ip);
        switch (r) {
            case RxeNet.ARP -> arp(f);
            case RxeNet.ROCE -> roce(f, p);
            case RxeNet.BAD_ICRC -> rcvError(RxeCounters.RCVD_ICRC_ERR, PortCounters.RX_ICRC_ENCAPSULATED);
            case RxeNet.UNKNOWN_OPCODE -> rcvError(RxeCounters.RCVD_UNKNOWN_OPCODE, PortCounters.RCV_UNKNOWN_PROTOS);
            case RxeNet.MALFORMED -> rcvError(RxeCounters.RCVD_MALFORMED, PortCounters.RCV_LENGTH_ERRORS);
            default -> {
                // another host's frame, or not RoCE: a NIC's filter drops it uncounted
            }
        }
    }

    /** A RoCE frame the port refused: rxe's reason, the port's receive errors (PortRcvErrors) and its reason in the port's counters. */
    private void rcvError(int rxeCounter, int portCounter) {
        counters.inc(rxeCounter);
        port.counters.inc(PortCounters.RCV_ERRORS);
        port.counters.inc(portCounter);
    }

    private void arp(Frame f) {
        int op = RxeNet.arpOp(f);
        long smac = RxeNet.arpSenderMac(f);
        int sip = RxeNet.arpSenderIp(f);
        neighbours.learn(sip, smac);
        if (op == 1 && RxeNet.arpTargetIp(f) == ip) {
            RxeNet.arp(rxTx, 2, smac, mac, ip, smac, sip);
            counters.inc(RxeCounters.ARP_REPLIES);
            link.send(rxTx);
        }
    }

    /** {@code rxe_rcv}'s header checks ({@code hdr_check}) then the responder or the completer. */
    private void roce(Frame f, RxePkt p) {
        counters.inc(RxeCounters.RCVD_PKTS);
        port.counters.rcv(f.len);
        HwQp qp = p.qpn == 0 || p.qpn == 1 ? null : dev.qp(p.qpn);
        if (qp == null || qp.dev != dev || qp.portNum != port.portNum) {
            counters.inc(RxeCounters.RCVD_NO_QP);
            return;
        }
        int transport = RxeOpcode.transport(p.opcode);
        // XRC (transport 5): requests to a target QP, responses to an initiator QP
        boolean typeOk = switch (qp.serviceType) {
            case HcaDevice.ST_RC -> transport == 0;
            case HcaDevice.ST_UD -> transport == 3;
            case HcaDevice.ST_XRC -> transport == RxeOpcode.XRC_BASE >> 5 && qp.xrcTarget == p.has(RxeOpcode.REQ);
            default -> false;
        };
        // P_Key: the default partition (full or limited membership), the only entry of the port's table
        if (!typeOk || (p.pkey & 0x7FFF) != 0x7FFF || !qp.state.receives()) {
            counters.inc(RxeCounters.RCVD_BAD_HDR);
            return;
        }
        if (transport != 3 && p.srcIp != qp.wireDip) {
            counters.inc(RxeCounters.RCVD_BAD_HDR); // check_addr: an RC or XRC packet from another host than the QP's peer
            return;
        }
        if (p.has(RxeOpcode.REQ)) {
            if (!qp.resp.enter()) {
                counters.inc(RxeCounters.RCVD_BAD_HDR); // moved out of the receiving states since the check above
                return;
            }
            try {
                WireResp.receive(this, qp, f, p);
            } finally {
                qp.resp.exit(); // a reset of the QP waits for this
            }
        } else {
            WireComp.receive(this, qp, f, p);
        }
    }

    /** The link goes: the receive thread stops, the socket closes. */
    void close() {
        link.close();
    }
}
