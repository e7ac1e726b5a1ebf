package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.UdpTunnelLink;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.sysfs.impl.SysfsTree;
import org.peerdirect.rdma.RcConnect;

/**
 * Port counters end to end: the engine counts, firmware hands them out by
 * {@code QUERY_VPORT_COUNTER} / {@code QUERY_Q_COUNTER}, mlx5_ib turns them into the PMA counters
 * and its hw_counters, ib-core shows them under {@code class/infiniband/<dev>/ports/1/counters/}
 * and {@code hw_counters/}. Known transfers move them by known amounts, on the fabric and on a
 * wire port (where they agree with rxe's counters, what {@code rdma statistic} shows).
 */
class Mlx5PortCountersTest extends Mlx5Machine {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_ATOMIC;

    @TempDir
    Path tmp;
    final List<String> warnings = new ArrayList<>();

    @AfterEach
    void down() {
        assertEquals(List.of(), stopMachine(), "every DMA page freed, no page with the firmware, IOMMU clean, every frame free");
        assertEquals(List.of(), warnings, "sysfs warnings");
    }

    void start(int... ids) {
        sysfs = new SysfsTree(tmp.resolve("sys"), warnings::add);
        startMachine(tmp, "counters-app", ids);
    }

    final class End {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;
        final int lid;
        final byte[] gid;

        End(int dev) {
            ctx = devs.get(dev).open(proc);
            pd = ctx.allocPd();
            cq = ctx.createCq(64, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = IbvQpType.RC;
            a.maxSendWr = 16;
            a.maxRecvWr = 16;
            a.maxSendSge = 1;
            a.maxRecvSge = 1;
            qp = pd.createQp(a);
            buf = proc.mmap(1 << 18);
            proc.populate(buf, 1 << 18, true);
            mr = pd.regMr(buf, 1 << 18, RW);
            lid = ctx.queryPort(1).lid();
            gid = IbvGid.parse(ctx.queryGid(1, 0));
        }

        void connect(End peer, boolean byGid, int pathMtu) {
            new RcConnect().access(RW).minRnrTimer(1).timeout(14, 7).pathMtu(pathMtu).gid(byGid ? peer.gid : null)
                    .connect(qp, byGid ? 0 : peer.lid, peer.qp.qpNum());
        }

        void post(IbvWrOpcode op, int len, End peer) {
            IbvSendWr w = new IbvSendWr().sge(buf, len, mr.lkey());
            w.opcode = op;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = peer.buf + 65536;
            w.rkey = peer.mr.rkey();
            w.compareAdd = 1;
            qp.postSend(w);
            IbvWc[] wc = {new IbvWc()};
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (cq.poll(1, wc) == 0) {
                assertTrue(System.nanoTime() < deadline, "a completion within 20 s");
                Thread.onSpinWait();
            }
            assertEquals(IbvWcStatus.SUCCESS, wc[0].status, wc[0].toString());
        }
    }

    /** A counter file of port 1 of {@code dev}, as a reader of sysfs gets it. */
    long file(int dev, String folder, String name) {
        return Long.parseLong(sysfs.read("class/infiniband/mlx5_" + dev + "/ports/1/" + folder + "/" + name).strip());
    }

    long pma(int dev, String name) {
        return file(dev, "counters", name);
    }

    @Test
    void aWriteAndAReadOnTheFabricMoveTheCountersByTheirSize() {
        start(ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        // sysfs.c's pma_group (PortCounters, from PPCNT's InfiniBand port counters) then the extended set
        assertEquals(List.of("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
                "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors", "port_rcv_constraint_errors",
                "local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_wait", "port_xmit_data",
                "port_rcv_data", "port_xmit_packets", "port_rcv_packets", "unicast_xmit_packets", "unicast_rcv_packets",
                "multicast_xmit_packets", "multicast_rcv_packets"), List.copyOf(ibs.get(0).queryPmaCounters(1).keySet()));
        assertEquals("rx_icrc_encapsulated", List.copyOf(ibs.get(0).getHwStats(1).keySet()).getLast(), "ext_ppcnt_cnts after the q counters");
        assertTrue(sysfs.list("class/infiniband/mlx5_0/ports/1/hw_counters").contains("out_of_sequence"),
                sysfs.list("class/infiniband/mlx5_0/ports/1/hw_counters").toString());
        End a = new End(0);
        End b = new End(1);
        a.connect(b, false, 5);
        b.connect(a, false, 5);
        long[] before = {pma(0, "port_xmit_data"), pma(0, "port_xmit_packets"), pma(1, "port_rcv_data"), pma(1, "port_rcv_packets"),
                pma(1, "port_xmit_packets"), pma(0, "port_rcv_packets"), file(1, "hw_counters", "rx_write_requests")};

        a.post(IbvWrOpcode.RDMA_WRITE, 65536, b); // 16 packets of 4096 bytes, one ACK

        assertEquals(65536 / 4, pma(0, "port_xmit_data") - before[0], "port_xmit_data counts 4-byte words");
        assertEquals(16, pma(0, "port_xmit_packets") - before[1], "16 packets at MTU 4096");
        assertEquals(65536 / 4, pma(1, "port_rcv_data") - before[2]);
        assertEquals(16, pma(1, "port_rcv_packets") - before[3]);
        assertEquals(1, pma(1, "port_xmit_packets") - before[4], "the responder's one acknowledgement");
        assertEquals(1, pma(0, "port_rcv_packets") - before[5]);
        assertEquals(1, file(1, "hw_counters", "rx_write_requests") - before[6]);
        assertEquals(pma(0, "port_xmit_packets"), pma(0, "unicast_xmit_packets"), "all unicast");

        long bx = pma(1, "port_xmit_data");
        long ar = pma(0, "port_rcv_data");
        long reads = file(1, "hw_counters", "rx_read_requests");
        a.post(IbvWrOpcode.RDMA_READ, 8192, b); // the data comes back in the responder's packets
        assertEquals(8192 / 4, pma(1, "port_xmit_data") - bx);
        assertEquals(8192 / 4, pma(0, "port_rcv_data") - ar);
        assertEquals(1, file(1, "hw_counters", "rx_read_requests") - reads);
        assertEquals(0, file(0, "hw_counters", "out_of_sequence") + file(1, "hw_counters", "duplicate_request"), "a clean fabric");
    }

    @Test
    void onAWirePortTheCountersAreTheFramesAndAgreeWithRxesCounters() {
        start(ConnectX4Device.DEVICE_CONNECTX6DX, ConnectX4Device.DEVICE_CONNECTX6DX);
        UdpTunnelLink[] l = UdpTunnelLink.pair("a", "b");
        var wa = models.get(0).attachWire(1, l[0], RxeNet.parseIp("10.98.0.1"), 0x0200_0a62_0001L, 1500);
        var wb = models.get(1).attachWire(1, l[1], RxeNet.parseIp("10.98.0.2"), 0x0200_0a62_0002L, 1500);
        End a = new End(0);
        End b = new End(1);
        a.connect(b, true, 3);
        b.connect(a, true, 3);
        long x0 = pma(0, "port_xmit_data");
        long r1 = pma(1, "port_rcv_data");

        a.post(IbvWrOpcode.RDMA_WRITE, 16384, b); // 16 frames of 1024 payload bytes at path MTU 1024

        // each frame: Ethernet, IPv4, UDP, BTH (12), payload, ICRC; the first carries the RETH (16) too
        long expected = 16384 + 16 * (RxeNet.OVERHEAD + 12) + 16;
        long words = pma(0, "port_xmit_data") - x0;
        if (pma(0, "port_xmit_packets") == 16) {
            assertEquals(expected / 4, words, "the frames' bytes, headers included, in words");
        } else {
            assertTrue(words * 4 > expected, "retransmitted frames count too: " + words * 4);
        }
        assertEquals(words, pma(1, "port_rcv_data") - r1, "what one port sent the other received");
        Map<String, Long> rxeA = wa.counters().snapshot();
        Map<String, Long> rxeB = wb.counters().snapshot();
        assertEquals(rxeA.get("sent_pkts") - rxeA.get("send_err"), pma(0, "port_xmit_packets"), "rdma statistic's sent_pkts");
        assertEquals(rxeA.get("rcvd_pkts"), pma(0, "port_rcv_packets"), "rdma statistic's rcvd_pkts");
        assertEquals(rxeB.get("sent_pkts") - rxeB.get("send_err"), pma(1, "port_xmit_packets"));
        assertEquals(rxeB.get("rcvd_pkts"), pma(1, "port_rcv_packets"));
        assertEquals(rxeB.get("duplicate_request"), file(1, "hw_counters", "duplicate_request"));
        assertEquals(rxeB.get("out_of_seq_request"), file(1, "hw_counters", "out_of_sequence"));
        assertTrue(pma(0, "port_xmit_packets") >= 16, "16 request packets at least: " + pma(0, "port_xmit_packets"));
    }

    /**
     * The port's error counters end to end: frames a hand-driven peer sends with a bad ICRC, a
     * length the frame does not hold, and an unknown opcode are dropped and counted by reason in
     * PPCNT (rx_icrc_encapsulated in hw_counters, port_rcv_errors in counters/, the IEEE 802.3
     * group's in-range length errors, RFC 2863's in_errors and in_unknown_protos), and a link
     * going down counts in link_downed.
     */
    @Test
    void badFramesAndALinkDownCountInThePortsErrorCounters() throws Exception {
        start(ConnectX4Device.DEVICE_CONNECTX6DX);
        UdpTunnelLink[] l = UdpTunnelLink.pair("dev", "peer");
        int devIp = RxeNet.parseIp("10.98.0.1");
        int peerIp = RxeNet.parseIp("10.98.0.2");
        long devMac = 0x0200_0a62_0001L;
        long peerMac = 0x0200_0a62_0002L;
        models.get(0).attachWire(1, l[0], devIp, devMac, 1500);
        l[1].start(f -> {
        });
        try {
            long errors = pma(0, "port_rcv_errors");
            long icrc = file(0, "hw_counters", "rx_icrc_encapsulated");
            long downed = pma(0, "link_downed");
            assertFalse(org.peerdirect.hca.wire.RxeOpcode.known(0x1f));
            org.peerdirect.hca.wire.Frame f = new org.peerdirect.hca.wire.Frame();
            for (int k = 0; k < 3; k++) {
                int l4 = org.peerdirect.hca.wire.RxeHdr.BTH_BYTES + 64;
                RxeNet.roceHeaders(f, devMac, peerMac, peerIp, devIp, k, RxeNet.SPORT_MIN, l4);
                org.peerdirect.hca.wire.RxeHdr.bth(f.seg, RxeNet.BTH, k == 2 ? 0x1f : 0x04, false, 0, 0xffff, 0x99, true, 0);
                RxeNet.seal(f);
                if (k == 0) {
                    f.seg.set(java.lang.foreign.ValueLayout.JAVA_BYTE, RxeNet.BTH + 20, (byte) 1); // a payload byte: the ICRC no longer matches
                } else if (k == 1) {
                    f.len -= 10; // the IP header announces 10 bytes more than the frame holds
                }
                l[1].send(f);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (pma(0, "port_rcv_errors") < errors + 3 && System.nanoTime() < deadline) {
                Thread.onSpinWait(); // the link's receive thread counts them
            }
            assertEquals(errors + 3, pma(0, "port_rcv_errors"), "three frames refused");
            assertEquals(icrc + 1, file(0, "hw_counters", "rx_icrc_encapsulated"), "one of them for its ICRC");
            long set = org.peerdirect.hca.cx4.ifc.Ppcnt.ACCESS_REG_DATA + org.peerdirect.hca.cx4.ifc.Ppcnt.COUNTER_SET;
            var ieee = Mlx5Counters.ppcnt(ibs.get(0), 1, org.peerdirect.hca.cx4.ifc.Ppcnt.GRP_IEEE_802_3);
            assertEquals(1, ieee.get(org.peerdirect.hca.cx4.ifc.CmdEntry.BE64, set + org.peerdirect.hca.cx4.ifc.Ppcnt.A_IN_RANGE_LENGTH_ERRORS),
                    "IEEE 802.3: one in-range length error");
            var rfc = Mlx5Counters.ppcnt(ibs.get(0), 1, org.peerdirect.hca.cx4.ifc.Ppcnt.GRP_RFC_2863);
            assertEquals(3, rfc.get(org.peerdirect.hca.cx4.ifc.CmdEntry.BE64, set + org.peerdirect.hca.cx4.ifc.Ppcnt.IN_ERRORS), "RFC 2863 ifInErrors");
            assertEquals(1, rfc.get(org.peerdirect.hca.cx4.ifc.CmdEntry.BE64, set + org.peerdirect.hca.cx4.ifc.Ppcnt.IN_UNKNOWN_PROTOS),
                    "RFC 2863 ifInUnknownProtos: the unknown opcode");
            models.get(0).setLink(1, false);
            assertEquals(downed + 1, pma(0, "link_downed"), "the link went down once");
            models.get(0).setLink(1, true);
            // a group the model does not keep (the physical layer's) is refused, not answered with zeros
            var e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Mlx5Counters.ppcnt(ibs.get(0), 1, 0x12));
            assertTrue(e.getMessage().contains("ACCESS_REG") && e.getMessage().contains("bad parameter"), e.getMessage());
        } finally {
            l[1].close();
        }
    }

    /**
     * Under the OSGi core the counter files serve one driver answer for its lifespan: a reader of
     * every file (the sysfs mirror, five times a second) costs one command per folder, and the
     * files show one consistent answer; past the lifespan, a read asks again.
     */
    /**
     * The mirror of an idle tree sends no counter command: its periodic refresh does not show
     * the counter files (on-demand attributes) nobody reads; a read through sysfs asks the device
     * (a QUERY_VPORT_COUNTER in the command log) and sees a transfer made after the mirror wrote
     * its files; a reader of a mirrored file makes the next refresh ask.
     */
    @Test
    void anIdleMirrorSendsNoCounterCommandAndAReadIsFresh() throws Exception {
        start(ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        SysfsTree other = new SysfsTree(tmp.resolve("sys2"), warnings::add);
        var dir = new org.peerdirect.ib.core.impl.IbSysfs(other, ibs.get(1), ibs.get(1).queryDevice());
        other.refresh(); // the first refresh writes every file once
        End a = new End(0);
        End b = new End(1);
        a.connect(b, false, 5);
        b.connect(a, false, 5);
        a.post(IbvWrOpcode.RDMA_WRITE, 4096, b);
        var log = cores.get(1).cmdLog();
        long mark = log.total();
        for (int i = 0; i < 50; i++) {
            other.refresh();
        }
        assertEquals(0, counterCommands(log, mark), "50 refreshes with nobody reading: no counter command");
        String hw = "class/infiniband/mlx5_1/ports/1/hw_counters/rx_write_requests";
        java.nio.file.Path f = other.root().resolve(hw);
        assertEquals("0\n", java.nio.file.Files.readString(f), "the file as the first refresh wrote it, before the write");
        assertEquals("1\n", other.read(hw), "a read through sysfs is fresh");
        assertTrue(counterCommands(log, mark) > 0, "and asked the device");
        other.refresh();
        assertEquals("1\n", java.nio.file.Files.readString(f), "the mirror shows what the read showed");
        dir.remove();
    }

    /** QUERY_VPORT_COUNTER / QUERY_Q_COUNTER commands logged from sequence number {@code mark} on. */
    private static long counterCommands(org.peerdirect.mlx5.core.CmdLog log, long mark) {
        return log.entries().stream().filter(e -> e.seq() >= mark)
                .filter(e -> e.opcode() == org.peerdirect.hca.cx4.ifc.Mlx5Cmd.QUERY_VPORT_COUNTER || e.opcode() == org.peerdirect.hca.cx4.ifc.Mlx5Cmd.QUERY_Q_COUNTER)
                .count();
    }

    @Test
    void withALifespanEveryFileOfAFolderIsOneCommand() {
        start(ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        SysfsTree other = new SysfsTree(tmp.resolve("sys2"), warnings::add);
        var dir = new org.peerdirect.ib.core.impl.IbSysfs(other, ibs.get(0), ibs.get(0).queryDevice(), TimeUnit.HOURS.toNanos(1));
        String counters = "class/infiniband/mlx5_0/ports/1/counters";
        long commands = cores.get(0).cmdLog().total();
        long sent = Long.parseLong(other.read(counters + "/port_xmit_data").strip());
        End a = new End(0);
        End b = new End(1);
        a.connect(b, false, 5);
        b.connect(a, false, 5);
        a.post(IbvWrOpcode.RDMA_WRITE, 4096, b);
        long mark = cores.get(0).cmdLog().total();
        for (int i = 0; i < 10; i++) {
            for (String f : other.list(counters)) {
                other.read(counters + "/" + f);
            }
        }
        assertEquals(mark, cores.get(0).cmdLog().total(), "reads within the lifespan send no command");
        assertEquals(sent, Long.parseLong(other.read(counters + "/port_xmit_data").strip()), "the answer of the lifespan's start");
        assertTrue(pma(0, "port_xmit_data") >= sent + 1024, "a core asking on every read sees the write");
        assertTrue(mark > commands, "the verbs sent their commands");
        dir.remove();
    }

    @Test
    void devinfoShowsARocePortsTwoGidsAndAnInfinibandPortsOne() {
        start(ConnectX4Device.DEVICE_CONNECTX6DX, ConnectX4Device.DEVICE_CONNECTX4);
        UdpTunnelLink[] l = UdpTunnelLink.pair("a", "b");
        models.get(0).attachWire(1, l[0], RxeNet.parseIp("10.98.0.1"), 0x0200_0a62_0001L, 1500);
        l[1].close();
        String roce = tools().devinfo("-v", "-d", "mlx5_0");
        assertTrue(roce.contains("GID[  0]:\t\t0000:0000:0000:0000:0000:ffff:0a62:0001, RoCE v2\n"), "the IPv4-mapped GID first: " + roce);
        // fe80:: and the MAC 02:00:0a:62:00:01 as EUI-64, the universal/local bit flipped
        assertTrue(roce.contains("GID[  1]:\t\tfe80:0000:0000:0000:0000:0aff:fe62:0001, RoCE v2"), "the link-local GID second: " + roce);
        assertTrue(!roce.contains("GID[  2]"), "no third entry: " + roce);
        assertTrue(roce.contains("link_layer:\t\tEthernet"), roce);
        String ib = tools().devinfo("-v", "-d", "mlx5_1");
        assertTrue(ib.contains("GID[  0]:\t\tfe80:") && !ib.contains("GID[  1]"), "an InfiniBand port has its one GID: " + ib);
        IbvContext c = devs.get(1).open(proc);
        assertEquals(8, c.queryPort(1).gidTblLen(), "mlx5_get_gid_table_len of gid_table_size 0");
        c.close();
    }
}
