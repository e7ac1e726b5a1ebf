package org.peerdirect.mlx5.ib;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pdlnk;
import org.peerdirect.hca.cx4.ifc.Ppcnt;
import org.peerdirect.ib.core.verbs.IbvNetdev;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * {@code mlx5_ib_get_netdev}: the network device behind an Ethernet port, for
 * {@code rdma link show}. On Linux it is mlx5e's netdev on the same core device, named by udev's
 * predictable PCI scheme ({@code enp<bus>s<slot>f<function>np<port-1>}); its state, MAC and MTU
 * come from the firmware (PAOS, the NIC vport context). The model's port is its own netdev and
 * reports all of it in one access register, PDLNK ({@link Pdlnk}): read fresh on every call, so a
 * port put on a wire or taken off it shows at once.
 */
final class Mlx5Netdev {

    private Mlx5Netdev() {
    }

    /** The netdev of {@code port}, or null on an InfiniBand device (it has none). */
    static IbvNetdev query(Mlx5IbDev dev, boolean ethernet, String bdf, int port) {
        if (!ethernet) {
            return null;
        }
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.ACCESS_REG, Ppcnt.OP_MOD_READ, Ppcnt.CMD_LEN);
        Ppcnt.ACCESS_REG_IN_REGISTER_ID.set(in, 0, Pdlnk.REG_ID);
        long reg = Ppcnt.ACCESS_REG_DATA;
        Pdlnk.LOCAL_PORT.set(in, reg, port);
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, Ppcnt.CMD_LEN));
        boolean up = Pdlnk.OPER_STATUS.get(out, reg) == Pdlnk.STATUS_UP;
        String name = pciName(bdf, port);
        if (Pdlnk.KIND.get(out, reg) != Pdlnk.KIND_UDP_TUNNEL) {
            return new IbvNetdev(name, "fabric", up, 0, 0, 0, null, null);
        }
        long mac = (Integer.toUnsignedLong(Pdlnk.MAC_47_32.get(out, reg)) << 32) | Integer.toUnsignedLong(Pdlnk.MAC_31_0.get(out, reg));
        return new IbvNetdev(name, "udp", up, mac, Pdlnk.MTU.get(out, reg), Pdlnk.IPV4.get(out, reg),
                end(Pdlnk.LOCAL_IPV4.get(out, reg), Pdlnk.LOCAL_UDP_PORT.get(out, reg)),
                end(Pdlnk.REMOTE_IPV4.get(out, reg), Pdlnk.REMOTE_UDP_PORT.get(out, reg)));
    }

    private static String end(int ip, int udpPort) {
        return udpPort == 0 ? null : (ip >>> 24) + "." + (ip >>> 16 & 0xFF) + "." + (ip >>> 8 & 0xFF) + "." + (ip & 0xFF) + ":" + udpPort;
    }

    /**
     * udev's predictable name of a PCI function's port ({@code net_id.c}: {@code en}, {@code p}
     * bus, {@code s} slot, {@code f} function, {@code np} the physical port name's number), a
     * domain other than 0 as a {@code P<domain>} prefix. {@code bdf} is {@code dddd:bb:ss.f} in hex.
     */
    static String pciName(String bdf, int port) {
        String[] a = bdf.split("[:.]");
        if (a.length != 4) {
            return "eth" + (port - 1);
        }
        int domain = Integer.parseInt(a[0], 16);
        return "en" + (domain != 0 ? "P" + domain : "") + "p" + Integer.parseInt(a[1], 16) + "s" + Integer.parseInt(a[2], 16) + "f"
                + Integer.parseInt(a[3], 16) + "np" + (port - 1);
    }
}
