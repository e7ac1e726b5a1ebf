package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.Counters;
import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Ppcnt;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * The port counters of {@code mlx5_ib}: the PMA answers of {@code mad.c} ({@code process_pma_cmd}:
 * PortCounters from the PPCNT register's InfiniBand port counters group,
 * {@code mlx5_core_query_ib_ppcnt} and {@code pma_cnt_assign}; PortCountersExtended from
 * {@code QUERY_VPORT_COUNTER}, {@code pma_cnt_ext_assign}, the octets shifted to 4-byte words as
 * the MAD carries them) and the hw_counters of {@code counters.c} ({@code basic_q_cnts},
 * {@code out_of_seq_q_cnts}, {@code retrans_q_cnts}: one {@code QUERY_Q_COUNTER} per read,
 * {@code mlx5_ib_query_q_counters}; then {@code ext_ppcnt_cnts}' {@code rx_icrc_encapsulated}
 * from PPCNT's Ethernet extended group, {@code mlx5_ib_query_ext_ppcnt_counters}).
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/hw/mlx5/counters.c">counters.c</a>
 */
final class Mlx5Counters {

    private Mlx5Counters() {
    }

    /** {@code process_pma_cmd}: PortCounters' error counters and PortCountersExtended, by sysfs name. */
    static Map<String, Long> queryPma(Mlx5IbDev dev, int port) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_VPORT_COUNTER, 0, Counters.VPORT_IN_LEN);
        Counters.VPORT_IN_PORT_NUM.set(in, 0, port);
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, Counters.VPORT_OUT_LEN));
        long s = Counters.VPORT_OUT_SET;
        long xUniPk = out.get(BE64, s + Counters.TRANSMITTED_IB_UNICAST + Counters.PACKETS);
        long xUniOct = out.get(BE64, s + Counters.TRANSMITTED_IB_UNICAST + Counters.OCTETS);
        long rUniPk = out.get(BE64, s + Counters.RECEIVED_IB_UNICAST + Counters.PACKETS);
        long rUniOct = out.get(BE64, s + Counters.RECEIVED_IB_UNICAST + Counters.OCTETS);
        long xMcPk = out.get(BE64, s + Counters.TRANSMITTED_IB_MULTICAST + Counters.PACKETS);
        long xMcOct = out.get(BE64, s + Counters.TRANSMITTED_IB_MULTICAST + Counters.OCTETS);
        long rMcPk = out.get(BE64, s + Counters.RECEIVED_IB_MULTICAST + Counters.PACKETS);
        long rMcOct = out.get(BE64, s + Counters.RECEIVED_IB_MULTICAST + Counters.OCTETS);
        Map<String, Long> m = new LinkedHashMap<>();
        pmaCounters(dev, port, m);
        // pma_cnt_ext_assign: MLX5_SUM_CNT of unicast and multicast, the data in words
        m.put("port_xmit_data", (xUniOct + xMcOct) >>> 2);
        m.put("port_rcv_data", (rUniOct + rMcOct) >>> 2);
        m.put("port_xmit_packets", xUniPk + xMcPk);
        m.put("port_rcv_packets", rUniPk + rMcPk);
        m.put("unicast_xmit_packets", xUniPk);
        m.put("unicast_rcv_packets", rUniPk);
        m.put("multicast_xmit_packets", xMcPk);
        m.put("multicast_rcv_packets", rMcPk);
        return m;
    }

    /**
     * {@code mlx5_core_query_ib_ppcnt} + {@code pma_cnt_assign}: PortCounters' error counters from
     * PPCNT's InfiniBand port counters group, by the sysfs names of {@code sysfs.c}'s
     * {@code pma_group} (the packed {@code link_overrun_errors} byte split into its two nibbles, as
     * the MAD carries them).
     */
    private static void pmaCounters(Mlx5IbDev dev, int port, Map<String, Long> m) {
        MemorySegment out = ppcnt(dev, port, Ppcnt.GRP_IB_PORT);
        long set = Ppcnt.ACCESS_REG_DATA + Ppcnt.COUNTER_SET;
        m.put("symbol_error", field(out, set, Ppcnt.SYMBOL_ERROR_COUNTER));
        m.put("link_error_recovery", field(out, set, Ppcnt.LINK_ERROR_RECOVERY_COUNTER));
        m.put("link_downed", field(out, set, Ppcnt.LINK_DOWNED_COUNTER));
        m.put("port_rcv_errors", field(out, set, Ppcnt.PORT_RCV_ERRORS));
        m.put("port_rcv_remote_physical_errors", field(out, set, Ppcnt.PORT_RCV_REMOTE_PHYSICAL_ERRORS));
        m.put("port_rcv_switch_relay_errors", field(out, set, Ppcnt.PORT_RCV_SWITCH_RELAY_ERRORS));
        m.put("port_xmit_discards", field(out, set, Ppcnt.PORT_XMIT_DISCARDS));
        m.put("port_xmit_constraint_errors", field(out, set, Ppcnt.PORT_XMIT_CONSTRAINT_ERRORS));
        m.put("port_rcv_constraint_errors", field(out, set, Ppcnt.PORT_RCV_CONSTRAINT_ERRORS));
        long overrun = field(out, set, Ppcnt.LINK_OVERRUN_ERRORS);
        m.put("local_link_integrity_errors", overrun >>> 4);
        m.put("excessive_buffer_overrun_errors", overrun & 0xf);
        m.put("VL15_dropped", field(out, set, Ppcnt.VL_15_DROPPED));
        m.put("port_xmit_wait", field(out, set, Ppcnt.PORT_XMIT_WAIT));
    }

    private static long field(MemorySegment out, long set, IfcField f) {
        return Integer.toUnsignedLong(f.get(out, set));
    }

    /**
     * One PPCNT read ({@code mlx5_core_access_reg(..., MLX5_REG_PPCNT, 0, 0)}: ACCESS_REG with
     * {@code op_mod} read) of {@code grp} on {@code port}: the command's output, the register at
     * {@link Ppcnt#ACCESS_REG_DATA}.
     */
    static MemorySegment ppcnt(Mlx5IbDev dev, int port, int grp) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.ACCESS_REG, Ppcnt.OP_MOD_READ, Ppcnt.CMD_LEN);
        Ppcnt.ACCESS_REG_IN_REGISTER_ID.set(in, 0, Ppcnt.REG_ID);
        Ppcnt.LOCAL_PORT.set(in, Ppcnt.ACCESS_REG_DATA, port);
        Ppcnt.GRP.set(in, Ppcnt.ACCESS_REG_DATA, grp);
        return dev.cmd(() -> dev.core.exec(in, Ppcnt.CMD_LEN));
    }

    /** The q counters' names ({@code basic_q_cnts}, {@code out_of_seq_q_cnts}, {@code retrans_q_cnts}) and fields. */
    private static final String[] Q_NAMES = {"rx_write_requests", "rx_read_requests", "rx_atomic_requests", "out_of_sequence",
            "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "local_ack_timeout_err"};
    private static final IfcField[] Q_FIELDS = {Counters.RX_WRITE_REQUESTS, Counters.RX_READ_REQUESTS, Counters.RX_ATOMIC_REQUESTS,
            Counters.OUT_OF_SEQUENCE, Counters.DUPLICATE_REQUEST, Counters.RNR_NAK_RETRY_ERR, Counters.PACKET_SEQ_ERR,
            Counters.LOCAL_ACK_TIMEOUT_ERR};

    /** {@code mlx5_ib_get_hw_stats} → {@code mlx5_ib_query_q_counters}: the port's counter set, 32-bit counters. */
    static Map<String, Long> queryQ(Mlx5IbDev dev, int port) {
        if (port != 1) {
            throw new IllegalArgumentException(dev.name() + ": port " + port + " does not exist (the device has port 1)");
        }
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_Q_COUNTER, 0, Counters.Q_IN_LEN);
        Counters.Q_IN_COUNTER_SET_ID.set(in, 0, 0);
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, Counters.Q_OUT_LEN));
        Map<String, Long> m = new LinkedHashMap<>();
        for (int i = 0; i < Q_NAMES.length; i++) {
            m.put(Q_NAMES[i], Integer.toUnsignedLong(Q_FIELDS[i].get(out, 0)));
        }
        // ext_ppcnt_cnts after the q counters, as mlx5_ib_get_hw_stats fills them
        MemorySegment ext = ppcnt(dev, port, Ppcnt.GRP_ETH_EXTENDED);
        m.put("rx_icrc_encapsulated", ext.get(BE64, Ppcnt.ACCESS_REG_DATA + Ppcnt.COUNTER_SET + Ppcnt.RX_ICRC_ENCAPSULATED));
        return m;
    }
}
