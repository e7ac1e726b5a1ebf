package org.peerdirect.hca.cx3.ifc;

/**
 * {@code MAD_IFC}: a 256-byte subnet-management MAD in the input mailbox, the response in the
 * output mailbox, the port as input modifier ({@code mlx4_MAD_IFC}). The SMP header fields and
 * the NodeInfo and PortInfo attributes the driver reads ({@code mlx4_ib_query_device},
 * {@code mlx4_ib_query_port}); attribute data starts at {@link #DATA}.
 */
public final class Mad {

    public static final int SIZE = 256;
    public static final int BASE_VERSION = 0;
    public static final int MGMT_CLASS = 1;
    public static final int CLASS_VERSION = 2;
    public static final int METHOD = 3;
    /** be16. */
    public static final int STATUS = 4;
    /** be16 / be32. */
    public static final int ATTR_ID = 16;
    public static final int ATTR_MOD = 20;
    public static final int DATA = 64;

    public static final int MGMT_CLASS_SUBN_LID_ROUTED = 0x01;
    public static final int METHOD_GET = 0x01;
    public static final int METHOD_GET_RESP = 0x81;
    /** The MAD status of an attribute the agent does not support. */
    public static final int STATUS_UNSUP_METHOD_ATTR = 0x0c;

    public static final int ATTR_NODE_INFO = 0x0011;
    public static final int ATTR_PORT_INFO = 0x0015;

    // NodeInfo, from DATA
    public static final int NI_NODE_TYPE = 2;
    public static final int NI_NUM_PORTS = 3;
    /** be64. */
    public static final int NI_SYS_IMAGE_GUID = 4;
    public static final int NI_NODE_GUID = 12;
    public static final int NI_PORT_GUID = 20;
    /** be16. */
    public static final int NI_DEVICE_ID = 30;
    /** be32. */
    public static final int NI_REVISION = 32;
    /** be32 (low 24 bits). */
    public static final int NI_VENDOR_ID = 36;

    // PortInfo, from DATA
    /** be16. */
    public static final int PI_LID = 16;
    /** low nibble: 1 down, 4 active. */
    public static final int PI_STATE = 32;
    /** high nibble: 5 LinkUp, 3 Disabled. */
    public static final int PI_PHYS_STATE = 33;
    public static final int PORT_STATE_DOWN = 1;
    public static final int PORT_STATE_ACTIVE = 4;

    // the performance management class (PMA, IBA 16.1): what process_mad's PMA part and sysfs's counters/ ask for
    public static final int MGMT_CLASS_PERF_MGMT = 0x04;
    public static final int ATTR_PORT_COUNTERS = 0x0012;
    public static final int ATTR_PORT_COUNTERS_EXT = 0x001d;
    /** PortCounters, from DATA ({@code struct ib_pma_portcounters}): be16 each. */
    public static final int PC_PORT_RCV_ERRORS = 8, PC_PORT_XMIT_DISCARDS = 14;
    /** PortCountersExtended, from DATA ({@code struct ib_pma_portcounters_ext}): be64 each, the data in 4-byte words. */
    public static final int PCE_XMIT_DATA = 8, PCE_RCV_DATA = 16, PCE_XMIT_PACKETS = 24, PCE_RCV_PACKETS = 32, PCE_UNICAST_XMIT_PACKETS = 40,
            PCE_UNICAST_RCV_PACKETS = 48, PCE_MULTICAST_XMIT_PACKETS = 56, PCE_MULTICAST_RCV_PACKETS = 64;

    private Mad() {
    }
}
