package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetSocketAddress;

import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pdlnk;
import org.peerdirect.hca.cx4.ifc.Ppcnt;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HcaPort;
import org.peerdirect.hca.engine.WirePort;
import org.peerdirect.hca.engine.PortCounters;

/**
 * {@code ACCESS_REG}: the access registers the model keeps, read only. PPCNT (the port's
 * performance counters, {@code mlx5_core_access_reg(..., MLX5_REG_PPCNT, ...)}) answers four
 * groups from the engine's port counters: IEEE 802.3 (frames and octets whole, length errors),
 * RFC 2863 (the interface's octets, unicast packets, errors, unknown protocols, discards), the
 * Ethernet extended group's {@code rx_icrc_encapsulated}, and the InfiniBand port counters (the
 * PMA PortCounters set, each counter saturating at its width as IBA 16.1.3.5 says). The model has
 * no physical layer: symbol errors, link recovery, constraint errors, VL15 drops and transmit
 * wait stay zero, as on a clean link. Writing (clearing) a counter set, another group, another
 * port or another register is refused with a bad parameter naming it. PDLNK ({@link Pdlnk}) is
 * the model's port link register: the cable's kind, state and addresses.
 *
 * <p>Lock rules: the firmware thread; the counters are the engine's atomics.
 */
final class Registers {

    private final HcaDevice engine;

    Registers(HcaDevice engine) {
        this.engine = engine;
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.ACCESS_REG, in -> Ppcnt.CMD_LEN, Ppcnt.CMD_LEN, true, this::accessReg);
    }

    private void accessReg(int opMod, MemorySegment in, MemorySegment out) throws Refused {
        int id = Ppcnt.ACCESS_REG_IN_REGISTER_ID.get(in, 0);
        if (id == Pdlnk.REG_ID) {
            pdlnk(opMod, in, out);
            return;
        }
        if (id != Ppcnt.REG_ID) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD,
                    String.format("register 0x%x is not modelled (PPCNT 0x5008 and PDLNK 0x9f01 are)", id));
        }
        if (opMod != Ppcnt.OP_MOD_READ) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, "PPCNT is read only here (op_mod " + opMod + ": clearing counters is not modelled)");
        }
        long reg = Ppcnt.ACCESS_REG_DATA;
        int port = Ppcnt.LOCAL_PORT.get(in, reg);
        int grp = Ppcnt.GRP.get(in, reg);
        if (port != 1) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_FUNCTION, "PPCNT: local_port " + port + " does not exist (the model has port 1)");
        }
        if (Ppcnt.CLR.get(in, reg) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, "PPCNT: clr is not modelled (counters only grow)");
        }
        PortCounters c = engine.port(port).counters();
        // the register comes back as asked (port, group), its counter set filled
        MemorySegment.copy(in, reg, out, reg, 8);
        long set = reg + Ppcnt.COUNTER_SET;
        switch (grp) {
            case Ppcnt.GRP_IEEE_802_3 -> {
                out.set(BE64, set + Ppcnt.A_FRAMES_TRANSMITTED_OK, c.get(PortCounters.XMIT_PACKETS));
                out.set(BE64, set + Ppcnt.A_FRAMES_RECEIVED_OK, c.get(PortCounters.RCV_PACKETS) + c.get(PortCounters.RCV_ERRORS));
                out.set(BE64, set + Ppcnt.A_OCTETS_TRANSMITTED_OK, c.get(PortCounters.XMIT_OCTETS));
                out.set(BE64, set + Ppcnt.A_OCTETS_RECEIVED_OK, c.get(PortCounters.RCV_OCTETS));
                out.set(BE64, set + Ppcnt.A_IN_RANGE_LENGTH_ERRORS, c.get(PortCounters.RCV_LENGTH_ERRORS));
            }
            case Ppcnt.GRP_RFC_2863 -> {
                out.set(BE64, set + Ppcnt.IN_OCTETS, c.get(PortCounters.RCV_OCTETS));
                out.set(BE64, set + Ppcnt.IN_UCAST_PKTS, c.get(PortCounters.RCV_PACKETS));
                out.set(BE64, set + Ppcnt.IN_ERRORS, c.get(PortCounters.RCV_ERRORS));
                out.set(BE64, set + Ppcnt.IN_UNKNOWN_PROTOS, c.get(PortCounters.RCV_UNKNOWN_PROTOS));
                out.set(BE64, set + Ppcnt.OUT_OCTETS, c.get(PortCounters.XMIT_OCTETS));
                out.set(BE64, set + Ppcnt.OUT_UCAST_PKTS, c.get(PortCounters.XMIT_PACKETS));
                out.set(BE64, set + Ppcnt.OUT_DISCARDS, c.get(PortCounters.XMIT_DISCARDS));
            }
            case Ppcnt.GRP_ETH_EXTENDED -> out.set(BE64, set + Ppcnt.RX_ICRC_ENCAPSULATED, c.get(PortCounters.RX_ICRC_ENCAPSULATED));
            case Ppcnt.GRP_IB_PORT -> {
                saturated(out, set, Ppcnt.LINK_DOWNED_COUNTER, c.get(PortCounters.LINK_DOWNED));
                saturated(out, set, Ppcnt.PORT_RCV_ERRORS, c.get(PortCounters.RCV_ERRORS));
                saturated(out, set, Ppcnt.PORT_XMIT_DISCARDS, c.get(PortCounters.XMIT_DISCARDS));
            }
            default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD,
                    String.format("PPCNT: group 0x%x is not modelled (0x0 IEEE 802.3, 0x1 RFC 2863, 0x5 Ethernet extended, 0x20 InfiniBand port)", grp));
        }
    }

    /**
     * PDLNK ({@link Pdlnk}): the port's cable as the model has it now, read only. A port on the
     * in-JVM fabric reports kind 0 and no addresses; one on a wire its MAC, MTU, IPv4 address and,
     * for a tunnel, the ends of its socket.
     */
    private void pdlnk(int opMod, MemorySegment in, MemorySegment out) throws Refused {
        if (opMod != Ppcnt.OP_MOD_READ) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, "PDLNK is read only (op_mod " + opMod + ")");
        }
        long reg = Ppcnt.ACCESS_REG_DATA;
        int port = Pdlnk.LOCAL_PORT.get(in, reg);
        if (port < 1 || port > engine.portCount()) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_FUNCTION,
                    "PDLNK: local_port " + port + " does not exist (the model has " + engine.portCount() + ")");
        }
        HcaPort p = engine.port(port);
        Pdlnk.LOCAL_PORT.set(out, reg, port);
        Pdlnk.OPER_STATUS.set(out, reg, p.active() ? Pdlnk.STATUS_UP : Pdlnk.STATUS_DOWN);
        WirePort w = p.wire();
        if (w == null) {
            Pdlnk.KIND.set(out, reg, Pdlnk.KIND_FABRIC);
            return;
        }
        Pdlnk.KIND.set(out, reg, Pdlnk.KIND_UDP_TUNNEL);
        Pdlnk.MTU.set(out, reg, w.ethMtu());
        Pdlnk.MAC_47_32.set(out, reg, (int) (w.mac() >>> 32) & 0xFFFF);
        Pdlnk.MAC_31_0.set(out, reg, (int) w.mac());
        Pdlnk.IPV4.set(out, reg, w.ip());
        end(out, reg, w.link().localEnd(), Pdlnk.LOCAL_IPV4, Pdlnk.LOCAL_UDP_PORT);
        end(out, reg, w.link().remoteEnd(), Pdlnk.REMOTE_IPV4, Pdlnk.REMOTE_UDP_PORT);
    }

    /** A tunnel end's IPv4 address and UDP port; zeros for none or a non-IPv4 end. */
    private static void end(MemorySegment out, long reg, InetSocketAddress a, IfcField ip, IfcField udp) {
        if (a != null && a.getAddress() instanceof Inet4Address v4) {
            byte[] b = v4.getAddress();
            ip.set(out, reg, (b[0] & 0xFF) << 24 | (b[1] & 0xFF) << 16 | (b[2] & 0xFF) << 8 | b[3] & 0xFF);
            udp.set(out, reg, a.getPort());
        }
    }

    /** A PMA counter of {@code f.width()} bits: it stops at all ones. */
    private static void saturated(MemorySegment out, long set, IfcField f, long v) {
        long max = (1L << f.width()) - 1;
        f.set(out, set, (int) Math.min(v, max));
    }
}
