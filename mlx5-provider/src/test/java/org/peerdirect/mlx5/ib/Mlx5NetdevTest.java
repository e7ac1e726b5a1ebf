package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.wire.FaultyLink;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.UdpTunnelLink;
import org.peerdirect.ib.core.verbs.IbvNetdev;
import org.peerdirect.kernel.mm.KernelException;

/**
 * A port's link as {@code rdma:devinfo} shows it (issue 44 item 6): the model reports its cable
 * in its link register (PDLNK), mlx5_ib's {@code get_netdev} reads it, ib-core hands it to the
 * tool. A ConnectX-6 Dx port on the in-JVM fabric, then on a UDP tunnel (its ends, MAC, IPv4
 * address, MTU, state), down and up again, then off the wire; an InfiniBand port has no netdev.
 */
class Mlx5NetdevTest extends Mlx5Machine {

    @TempDir
    Path tmp;

    @AfterEach
    void down() {
        if (proc == null) {
            return; // a test with no machine
        }
        assertEquals(List.of(), stopMachine(), "every DMA page freed, no page with the firmware, IOMMU clean, every frame free");
    }

    @Test
    void devinfoShowsTheFabricThenTheTunnelsEndsAddressesAndStateThenTheFabricAgain() throws Exception {
        startMachine(tmp, "netdev-app", ConnectX4Device.DEVICE_CONNECTX6DX, ConnectX4Device.DEVICE_CONNECTX4);
        String bdf = fns.get(0).bdf();
        String[] a = bdf.split("[:.]");
        String name = "enp" + Integer.parseInt(a[1], 16) + "s" + Integer.parseInt(a[2], 16) + "f" + Integer.parseInt(a[3], 16) + "np0";

        String fabric = tools().devinfo("-d", "mlx5_0");
        assertTrue(fabric.contains("\t\t\tnetdev:\t\t\t" + name + " (state UP)\n"), "the predictable PCI name of " + bdf + ": " + fabric);
        assertTrue(fabric.contains("\t\t\tlink:\t\t\tfabric (in-JVM)"), fabric);
        assertFalse(fabric.contains("inet:"), "no address on the fabric: " + fabric);

        UdpTunnelLink tunnel = new UdpTunnelLink("netdev-test", new InetSocketAddress("127.0.0.1", 0), new InetSocketAddress("127.0.0.1", 7001));
        int local = tunnel.localAddress().getPort();
        // through a FaultyLink: a wrapped link reports the tunnel's ends too
        models.get(0).attachWire(1, new FaultyLink(tunnel, FaultyLink.Faults.NONE), RxeNet.parseIp("10.97.0.5"), 0x0200_0a61_0005L, 9000);
        String wire = tools().devinfo("-v", "-d", "mlx5_0");
        assertTrue(wire.contains("\t\t\tnetdev:\t\t\t" + name + " (state UP)\n"), wire);
        assertTrue(wire.contains("\t\t\tlink:\t\t\tudp local 127.0.0.1:" + local + " remote 127.0.0.1:7001\n"), wire);
        assertTrue(wire.contains("\t\t\tlink/ether:\t\t02:00:0a:61:00:05\n"), wire);
        assertTrue(wire.contains("\t\t\tinet:\t\t\t10.97.0.5\n"), wire);
        assertTrue(wire.contains("\t\t\tnetdev_mtu:\t\t9000"), wire);
        assertTrue(wire.indexOf("GID[") < wire.indexOf("netdev:"), "the netdev after the port's attributes: " + wire);

        models.get(0).setLink(1, false);
        IbvNetdev n = devs.get(0).netdev(1);
        assertEquals("DOWN", n.state(), "the cable pulled: " + n);
        assertEquals("udp", n.kind());
        assertEquals(0x0a61_0005, n.ipv4());
        models.get(0).setLink(1, true);
        assertEquals("UP", devs.get(0).netdev(1).state());

        models.get(0).detachWire(1);
        String back = tools().devinfo("-d", "mlx5_0");
        assertTrue(back.contains("\t\t\tlink:\t\t\tfabric (in-JVM)") && !back.contains("inet:"), "off the wire, on the fabric again: " + back);

        assertNull(devs.get(1).netdev(1), "an InfiniBand port has no netdev");
        assertFalse(tools().devinfo("-d", "mlx5_1").contains("netdev:"), "nor does devinfo show one");
        KernelException e = assertThrows(KernelException.class, () -> devs.get(0).netdev(2));
        assertTrue(e.getMessage().contains("port 2 does not exist"), e.getMessage());
    }

    /** PDLNK through ACCESS_REG as the driver sends it, with {@code op_mod} and {@code local_port} asked. */
    private java.lang.foreign.MemorySegment pdlnk(int opMod, int port) {
        java.lang.foreign.MemorySegment in = org.peerdirect.mlx5.core.Mlx5CoreDev.input(org.peerdirect.hca.cx4.ifc.Mlx5Cmd.ACCESS_REG, opMod,
                org.peerdirect.hca.cx4.ifc.Ppcnt.CMD_LEN);
        org.peerdirect.hca.cx4.ifc.Ppcnt.ACCESS_REG_IN_REGISTER_ID.set(in, 0, org.peerdirect.hca.cx4.ifc.Pdlnk.REG_ID);
        org.peerdirect.hca.cx4.ifc.Pdlnk.LOCAL_PORT.set(in, org.peerdirect.hca.cx4.ifc.Ppcnt.ACCESS_REG_DATA, port);
        return cores.get(0).exec(in, org.peerdirect.hca.cx4.ifc.Ppcnt.CMD_LEN);
    }

    @Test
    void theLinkRegisterIsReadOnlyAndKnowsItsPorts() {
        startMachine(tmp, "pdlnk-app", ConnectX4Device.DEVICE_CONNECTX6DX);
        RuntimeException write = assertThrows(RuntimeException.class, () -> pdlnk(org.peerdirect.hca.cx4.ifc.Ppcnt.OP_MOD_WRITE, 1));
        // the driver sees status and syndrome (the firmware's reason text is in its command log): bad op_mod
        assertTrue(String.valueOf(write.getMessage()).contains("bad parameter(0x3), syndrome (0xbad0006)"), "a write is refused: " + write);
        RuntimeException port = assertThrows(RuntimeException.class, () -> pdlnk(org.peerdirect.hca.cx4.ifc.Ppcnt.OP_MOD_READ, 3));
        assertTrue(String.valueOf(port.getMessage()).contains("bad parameter(0x3), syndrome (0xbad0007)"), "a port the device lacks is refused: " + port);
        java.lang.foreign.MemorySegment out = pdlnk(org.peerdirect.hca.cx4.ifc.Ppcnt.OP_MOD_READ, 1);
        assertEquals(org.peerdirect.hca.cx4.ifc.Pdlnk.KIND_FABRIC, org.peerdirect.hca.cx4.ifc.Pdlnk.KIND.get(out, org.peerdirect.hca.cx4.ifc.Ppcnt.ACCESS_REG_DATA),
                "a port on the fabric");
        assertEquals(org.peerdirect.hca.cx4.ifc.Pdlnk.STATUS_UP,
                org.peerdirect.hca.cx4.ifc.Pdlnk.OPER_STATUS.get(out, org.peerdirect.hca.cx4.ifc.Ppcnt.ACCESS_REG_DATA));
    }

    @Test
    void udevsPredictableNames() {
        assertEquals("enp3s0f0np0", Mlx5Netdev.pciName("0000:03:00.0", 1));
        assertEquals("enp17s2f1np1", Mlx5Netdev.pciName("0000:11:02.1", 2));
        assertEquals("enP2p1s0f0np0", Mlx5Netdev.pciName("0002:01:00.0", 1));
    }
}
