package org.peerdirect.hca.cx4.ifc;

/**
 * {@code ACCESS_REG} and the PPCNT register (Ports Performance Counters, register id 0x5008) as
 * {@code mlx5_ifc.h} lays them out: {@code struct mlx5_ifc_access_register_in_bits} (the register
 * id, the argument, the register's bytes at 0x10; {@code op_mod} 1 reads, 0 writes) and
 * {@code struct mlx5_ifc_ppcnt_reg_bits} ({@code local_port}, {@code grp}, {@code clr}, the
 * counter set at byte 8). The groups the model keeps: the IEEE 802.3 group's frame counters
 * ({@code eth_802_3_cntrs_grp_data_layout}), RFC 2863's interface counters
 * ({@code eth_2863_cntrs_grp_data_layout}), the Ethernet extended group's
 * {@code rx_icrc_encapsulated} ({@code eth_extended_cntrs_grp_data_layout}) and the InfiniBand
 * port counters ({@code ib_port_cntrs_grp_data_layout}, what {@code mlx5_ib} answers PMA
 * PortCounters from). Offsets are bytes from the start of the counter set; 64-bit counters are
 * high then low dword.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/include/linux/mlx5/mlx5_ifc.h">mlx5_ifc_ppcnt_reg_bits</a>
 */
public final class Ppcnt {

    private Ppcnt() {
    }

    /** {@code MLX5_REG_PPCNT}. */
    public static final int REG_ID = 0x5008;
    /** {@code access_register_in}: the register id and the argument; the register's data from byte 0x10, in and out. */
    public static final IfcField ACCESS_REG_IN_REGISTER_ID = new IfcField(0x50, 16);
    public static final IfcField ACCESS_REG_IN_ARGUMENT = new IfcField(0x60, 32);
    public static final long ACCESS_REG_DATA = 0x10;
    /** {@code op_mod} of ACCESS_REG: {@code !write}. */
    public static final int OP_MOD_WRITE = 0, OP_MOD_READ = 1;

    /** PPCNT's size ({@code 0x800} bits) and its command's in and out lengths. */
    public static final int REG_LEN = 0x100;
    public static final int CMD_LEN = 0x10 + REG_LEN;

    /** Fields of the register (offsets from the register's start). */
    public static final IfcField LOCAL_PORT = new IfcField(0x08, 8);
    public static final IfcField GRP = new IfcField(0x1a, 6);
    public static final IfcField CLR = new IfcField(0x20, 1);
    /** The counter set's byte offset in the register. */
    public static final long COUNTER_SET = 0x08;

    /** Groups ({@code MLX5_IEEE_802_3_COUNTERS_GROUP}, ...). */
    public static final int GRP_IEEE_802_3 = 0x00, GRP_RFC_2863 = 0x01, GRP_ETH_EXTENDED = 0x05, GRP_IB_PORT = 0x20;

    /** IEEE 802.3 group (64-bit): frames and octets sent and received whole, length errors. */
    public static final long A_FRAMES_TRANSMITTED_OK = 0x00, A_FRAMES_RECEIVED_OK = 0x08, A_FRAME_CHECK_SEQUENCE_ERRORS = 0x10,
            A_OCTETS_TRANSMITTED_OK = 0x20, A_OCTETS_RECEIVED_OK = 0x28, A_IN_RANGE_LENGTH_ERRORS = 0x50;

    /** RFC 2863 group (64-bit): the interface's octets, unicast packets, discards, errors, unknown protocols. */
    public static final long IN_OCTETS = 0x00, IN_UCAST_PKTS = 0x08, IN_DISCARDS = 0x10, IN_ERRORS = 0x18, IN_UNKNOWN_PROTOS = 0x20,
            OUT_OCTETS = 0x28, OUT_UCAST_PKTS = 0x30, OUT_DISCARDS = 0x38, OUT_ERRORS = 0x40;

    /** Ethernet extended group (64-bit): RoCE packets received with a bad ICRC. */
    public static final long RX_ICRC_ENCAPSULATED = 0x38;

    /** InfiniBand port counters group: the PMA PortCounters' widths (16 or 8 bits; {@code port_xmit_wait} 32). */
    public static final IfcField SYMBOL_ERROR_COUNTER = new IfcField(0x00, 16);
    public static final IfcField LINK_ERROR_RECOVERY_COUNTER = new IfcField(0x10, 8);
    public static final IfcField LINK_DOWNED_COUNTER = new IfcField(0x18, 8);
    public static final IfcField PORT_RCV_ERRORS = new IfcField(0x20, 16);
    public static final IfcField PORT_RCV_REMOTE_PHYSICAL_ERRORS = new IfcField(0x30, 16);
    public static final IfcField PORT_RCV_SWITCH_RELAY_ERRORS = new IfcField(0x40, 16);
    public static final IfcField PORT_XMIT_DISCARDS = new IfcField(0x50, 16);
    public static final IfcField PORT_XMIT_CONSTRAINT_ERRORS = new IfcField(0x60, 8);
    public static final IfcField PORT_RCV_CONSTRAINT_ERRORS = new IfcField(0x68, 8);
    /** local_link_integrity_errors (high nibble) and excessive_buffer_overrun_errors (low nibble), as the PMA packs them. */
    public static final IfcField LINK_OVERRUN_ERRORS = new IfcField(0x78, 8);
    public static final IfcField VL_15_DROPPED = new IfcField(0x90, 16);
    public static final IfcField PORT_XMIT_WAIT = new IfcField(0x120, 32);
}
