package org.peerdirect.rdma.tools;

import java.util.List;

import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvNetdev;
import org.peerdirect.ib.core.verbs.IbvPortAttr;

/**
 * {@code rdma:devinfo [-v] [-d dev] [-i port]}: the devices' attributes and ports, as
 * {@code ibv_devinfo} (rdma-core {@code libibverbs/examples/devinfo.c}: {@code print_hca_cap},
 * {@code print_odp_caps}), each device read through a context of a short-lived process; an
 * Ethernet port's netdev and link ({@code rdma link show}, {@code ip -d addr show}) after its
 * attributes.
 */
final class Devinfo {

    static final String DESCRIPTION = "the RDMA devices' attributes and ports, as ibv_devinfo. Example: rdma:devinfo -v -d mlx4_0";

    private final ToolEnv env;

    Devinfo(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        Options o = new Options("rdma:devinfo", "the devices' attributes and ports, as ibv_devinfo", args, List.of(
                Options.value("-d", "DEVICE", "only this device (rdma:devices)", null),
                Options.value("-i", "PORT", "only this port (the models have one port)", 1),
                Options.flag("-v", "every attribute")));
        if (o.help()) {
            return o.printUsage();
        }
        o.number("-i", 1, 1);
        boolean verbose = o.flag("-v");
        List<IbvDevice> list = DeviceLookup.selected(env, o.string("-d"));
        if (list.isEmpty()) {
            return "No IB devices found";
        }
        StringBuilder sb = new StringBuilder();
        for (IbvDevice d : list) {
            env.withContext(d, "ibv_devinfo", (p, c) -> printHcaCap(sb, d, c, verbose)).append('\n');
        }
        return sb.toString().stripTrailing();
    }

    /** {@code print_hca_cap}: the device's attributes, then each port's. */
    private static StringBuilder printHcaCap(StringBuilder sb, IbvDevice d, IbvContext c, boolean verbose) {
        IbvDeviceAttr a = c.queryDeviceEx();
        sb.append("hca_id:\t").append(d.name()).append('\n');
        sb.append("\ttransport:\t\t\tInfiniBand (0)\n");
        sb.append("\tfw_ver:\t\t\t\t").append(a.fwVer()).append('\n');
        sb.append("\tnode_guid:\t\t\t").append(guid(a.nodeGuid())).append('\n');
        sb.append("\tsys_image_guid:\t\t\t").append(guid(a.sysImageGuid())).append('\n');
        sb.append(String.format("\tvendor_id:\t\t\t0x%04x%n", a.vendorId()));
        sb.append("\tvendor_part_id:\t\t\t").append(a.vendorPartId()).append('\n');
        sb.append(String.format("\thw_ver:\t\t\t\t0x%x%n", a.hwVer()));
        sb.append("\tphys_port_cnt:\t\t\t").append(a.physPortCnt()).append('\n');
        if (verbose) {
            printVerbose(sb, a);
            printOdpCaps(sb, a.odpCaps());
        }
        for (int port = 1; port <= a.physPortCnt(); port++) {
            printPort(sb, c, port, verbose);
            printNetdev(sb, d.netdev(port));
        }
        return sb;
    }

    /** The attributes {@code -v} adds. */
    private static void printVerbose(StringBuilder sb, IbvDeviceAttr a) {
        sb.append(String.format("\tmax_mr_size:\t\t\t0x%x%n", a.maxMrSize()));
        sb.append(String.format("\tpage_size_cap:\t\t\t0x%x%n", a.pageSizeCap()));
        sb.append("\tmax_qp:\t\t\t\t").append(a.maxQp()).append('\n');
        sb.append("\tmax_qp_wr:\t\t\t").append(a.maxQpWr()).append('\n');
        sb.append(String.format("\tdevice_cap_flags:\t\t0x%08x%n", a.deviceCapFlags()));
        sb.append(String.format("\tdevice_cap_flags_ex:\t\t0x%x%n", a.deviceCapFlagsEx()));
        if ((a.deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_FLUSH_GLOBAL) != 0) {
            sb.append("\t\t\t\t\tFLUSH_GLOBAL\n");
        }
        if ((a.deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT) != 0) {
            sb.append("\t\t\t\t\tFLUSH_PERSISTENT\n");
        }
        if ((a.deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_ATOMIC_WRITE) != 0) {
            sb.append("\t\t\t\t\tATOMIC_WRITE\n");
        }
        sb.append("\tmax_sge:\t\t\t").append(a.maxSge()).append('\n');
        sb.append("\tmax_cq:\t\t\t\t").append(a.maxCq()).append('\n');
        sb.append("\tmax_cqe:\t\t\t").append(a.maxCqe()).append('\n');
        sb.append("\tmax_mr:\t\t\t\t").append(a.maxMr()).append('\n');
        sb.append("\tmax_pd:\t\t\t\t").append(a.maxPd()).append('\n');
        sb.append("\tmax_qp_rd_atom:\t\t\t").append(a.maxQpRdAtom()).append('\n');
        sb.append("\tmax_qp_init_rd_atom:\t\t").append(a.maxQpInitRdAtom()).append('\n');
        sb.append("\tatomic_cap:\t\t\t").append(a.atomicCap() == IbvDeviceAttr.ATOMIC_HCA ? "ATOMIC_HCA (1)" : "ATOMIC_NONE (0)").append('\n');
        sb.append("\tmax_srq:\t\t\t").append(a.maxSrq()).append('\n');
        sb.append("\tmax_srq_wr:\t\t\t").append(a.maxSrqWr()).append('\n');
        sb.append("\tmax_srq_sge:\t\t\t").append(a.maxSrqSge()).append('\n');
    }

    /** {@code print_odp_caps}. */
    private static void printOdpCaps(StringBuilder sb, IbvDeviceAttr.OdpCaps odp) {
        sb.append("\tgeneral_odp_caps:\n");
        if (odp.generalCaps() == 0) {
            sb.append("\t\t\t\t\tNO SUPPORT\n");
        }
        if ((odp.generalCaps() & IbvDeviceAttr.ODP_SUPPORT) != 0) {
            sb.append("\t\t\t\t\tODP_SUPPORT\n");
        }
        if ((odp.generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) != 0) {
            sb.append("\t\t\t\t\tODP_SUPPORT_IMPLICIT\n");
        }
        sb.append("\trc_odp_caps:\n").append(odpBits(odp.rcOdpCaps()));
        sb.append("\tuc_odp_caps:\n").append(odpBits(odp.ucOdpCaps()));
        sb.append("\tud_odp_caps:\n").append(odpBits(odp.udOdpCaps()));
        sb.append("\txrc_odp_caps:\n").append(odpBits(odp.xrcOdpCaps()));
    }

    private static void printPort(StringBuilder sb, IbvContext c, int port, boolean verbose) {
        IbvPortAttr pa = c.queryPort(port);
        sb.append("\t\tport:\t").append(port).append('\n');
        sb.append("\t\t\tstate:\t\t\t").append(IbvPortAttr.stateName(pa.state())).append(" (").append(pa.state()).append(")\n");
        sb.append("\t\t\tmax_mtu:\t\t").append(128 << pa.maxMtu()).append(" (").append(pa.maxMtu()).append(")\n");
        sb.append("\t\t\tactive_mtu:\t\t").append(128 << pa.activeMtu()).append(" (").append(pa.activeMtu()).append(")\n");
        sb.append("\t\t\tsm_lid:\t\t\t").append(pa.smLid()).append('\n');
        sb.append("\t\t\tport_lid:\t\t").append(pa.lid()).append('\n');
        sb.append(String.format("\t\t\tport_lmc:\t\t0x%02x%n", pa.lmc()));
        sb.append("\t\t\tlink_layer:\t\t").append(pa.linkLayer() == IbvPortAttr.LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet").append('\n');
        if (verbose) {
            sb.append("\t\t\tmax_msg_sz:\t\t0x").append(Long.toHexString(pa.maxMsgSz())).append('\n');
            sb.append("\t\t\tactive_width:\t\t4X (").append(pa.activeWidth()).append(")\n");
            sb.append("\t\t\tactive_speed:\t\t14.0 Gbps (").append(pa.activeSpeed()).append(")\n");
            sb.append("\t\t\tphys_state:\t\t").append(pa.physState() == 5 ? "LINK_UP" : "POLLING").append(" (").append(pa.physState()).append(")\n");
            // print_all_port_gids: every entry of the table that is in use (an empty entry is the zero
            // GID, or EINVAL as rdma_query_gid answers for one: skipped as ibv_query_gid_ex's failure is)
            boolean roce = pa.linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET;
            for (int i = 0; i < pa.gidTblLen(); i++) {
                String gid;
                try {
                    gid = c.queryGid(port, i);
                } catch (org.peerdirect.kernel.mm.KernelException empty) {
                    continue;
                }
                if (!gid.replace("0", "").replace(":", "").isEmpty()) {
                    sb.append(String.format("\t\t\tGID[%3d]:\t\t%s%s%n", i, gid, roce ? ", RoCE v2" : ""));
                }
            }
        }
    }

    /**
     * An Ethernet port's netdev, as {@code rdma link show} names it ({@code netdev}, its state)
     * and {@code ip -d addr show} describes it: the link (the in-JVM fabric, or a UDP tunnel with
     * its local and remote ends), MAC, IPv4 address and MTU. Nothing for a port without one.
     */
    private static void printNetdev(StringBuilder sb, IbvNetdev n) {
        if (n == null) {
            return;
        }
        sb.append("\t\t\tnetdev:\t\t\t").append(n.name()).append(" (state ").append(n.state()).append(")\n");
        if (n.kind().equals("fabric")) {
            sb.append("\t\t\tlink:\t\t\tfabric (in-JVM)\n");
            return;
        }
        sb.append("\t\t\tlink:\t\t\t").append(n.kind());
        if (n.local() != null) {
            sb.append(" local ").append(n.local());
        }
        if (n.remote() != null) {
            sb.append(" remote ").append(n.remote());
        }
        sb.append('\n');
        sb.append("\t\t\tlink/ether:\t\t").append(n.macString()).append('\n');
        if (n.ipv4() != 0) {
            sb.append("\t\t\tinet:\t\t\t").append(n.ipString()).append('\n');
        }
        sb.append("\t\t\tnetdev_mtu:\t\t").append(n.mtu()).append('\n');
    }

    private static String odpBits(int bits) {
        String[] names = {"SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_WRITE", "SUPPORT_READ", "SUPPORT_ATOMIC", "SUPPORT_SRQ_RECV", "SUPPORT_FLUSH",
            "SUPPORT_ATOMIC_WRITE"};
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < names.length; i++) {
            if ((bits & (1 << i)) != 0) {
                sb.append("\t\t\t\t\t").append(names[i]).append('\n');
            }
        }
        return sb.length() == 0 ? "\t\t\t\t\tNO SUPPORT\n" : sb.toString();
    }

    private static String guid(long g) {
        return String.format("%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff, g & 0xffff);
    }
}
