package org.peerdirect.hca.cx4.ifc;

/**
 * The port counter commands' layouts ({@code mlx5_ifc.h}). {@code QUERY_VPORT_COUNTER}: input
 * {@code port_num} after {@code other_vport}; output {@code struct mlx5_ifc_vport_counter_bits} at
 * byte 0x10, a run of {@code traffic_counter}s (packets then octets, 64 bits each, big-endian).
 * {@code QUERY_Q_COUNTER}: input {@code counter_set_id} in the input's last byte; output the queue
 * counters as 32-bit fields, each followed by 32 reserved bits, from byte 0x10.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/include/linux/mlx5/mlx5_ifc.h">mlx5_ifc_query_vport_counter_out_bits, mlx5_ifc_query_q_counter_out_bits</a>
 */
public final class Counters {

    private Counters() {
    }

    public static final IfcField VPORT_IN_PORT_NUM = new IfcField(0x4c, 4);
    public static final int VPORT_IN_LEN = 0x20;
    /** The counter set's offset in the output, and each traffic counter's offset in it (packets; octets 8 bytes on). */
    public static final long VPORT_OUT_SET = 0x10;
    public static final long RECEIVED_ERRORS = 0x00, TRANSMIT_ERRORS = 0x10, RECEIVED_IB_UNICAST = 0x20, TRANSMITTED_IB_UNICAST = 0x30,
            RECEIVED_IB_MULTICAST = 0x40, TRANSMITTED_IB_MULTICAST = 0x50;
    public static final long PACKETS = 0, OCTETS = 8;
    public static final int VPORT_OUT_LEN = 0x10 + 0x100;

    public static final IfcField Q_IN_COUNTER_SET_ID = new IfcField(0xf8, 8);
    public static final int Q_IN_LEN = 0x20;
    public static final IfcField RX_WRITE_REQUESTS = new IfcField(0x80, 32);
    public static final IfcField RX_READ_REQUESTS = new IfcField(0xc0, 32);
    public static final IfcField RX_ATOMIC_REQUESTS = new IfcField(0x100, 32);
    public static final IfcField OUT_OF_BUFFER = new IfcField(0x180, 32);
    public static final IfcField OUT_OF_SEQUENCE = new IfcField(0x1c0, 32);
    public static final IfcField DUPLICATE_REQUEST = new IfcField(0x200, 32);
    public static final IfcField RNR_NAK_RETRY_ERR = new IfcField(0x240, 32);
    public static final IfcField PACKET_SEQ_ERR = new IfcField(0x280, 32);
    public static final IfcField IMPLIED_NAK_SEQ_ERR = new IfcField(0x2c0, 32);
    public static final IfcField LOCAL_ACK_TIMEOUT_ERR = new IfcField(0x300, 32);
    public static final int Q_OUT_LEN = 0x100;
}
