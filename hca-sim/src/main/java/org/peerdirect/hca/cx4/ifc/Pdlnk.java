package org.peerdirect.hca.cx4.ifc;

/**
 * PDLNK, the model's port link register (read through {@code ACCESS_REG}, register id
 * {@value #REG_ID}): what the port's cable is and what it carries, the facts a Linux host keeps
 * in the port's netdev ({@code struct net_device}: {@code dev_addr}, {@code mtu},
 * {@code operstate}, the IPv4 address of its {@code in_device}) and, for a tunnel, the two ends
 * {@code ip -d link show} prints. A real ConnectX spreads the first of these over PAOS
 * ({@code oper_status}), PMTU and the NIC vport context and knows nothing of IP: the model's port
 * is its own netdev (it answers ARP and derives its GIDs from its address, as rxe's netdev does),
 * so it reports them in one register of the same access-register family. Not in
 * {@code mlx5_ifc.h}; the id is in the range the PRM leaves to the vendor.
 *
 * <p>Layout (MSB-first bit offsets, as {@link IfcField}): {@code local_port} the port asked;
 * {@code kind} 0 the in-JVM fabric (no addresses), 1 a UDP tunnel of Ethernet frames;
 * {@code oper_status} as PAOS (1 up, 2 down); {@code mtu} the Ethernet MTU; the MAC; the IPv4
 * address; the tunnel's local and remote IPv4 address and UDP port (0 where the end is not IPv4).
 */
public final class Pdlnk {

    private Pdlnk() {
    }

    /** The model's link register id. */
    public static final int REG_ID = 0x9F01;
    /** The register's size in bytes; its ACCESS_REG command uses PPCNT's mailbox size ({@link Ppcnt#CMD_LEN}). */
    public static final int REG_LEN = 0x40;

    public static final IfcField LOCAL_PORT = new IfcField(0x08, 8);
    public static final IfcField KIND = new IfcField(0x20, 8);
    public static final IfcField OPER_STATUS = new IfcField(0x28, 8);
    public static final IfcField MTU = new IfcField(0x30, 16);
    public static final IfcField MAC_47_32 = new IfcField(0x50, 16);
    public static final IfcField MAC_31_0 = new IfcField(0x60, 32);
    public static final IfcField IPV4 = new IfcField(0x80, 32);
    public static final IfcField LOCAL_IPV4 = new IfcField(0xa0, 32);
    public static final IfcField LOCAL_UDP_PORT = new IfcField(0xd0, 16);
    public static final IfcField REMOTE_IPV4 = new IfcField(0xe0, 32);
    public static final IfcField REMOTE_UDP_PORT = new IfcField(0x110, 16);

    /** {@link #KIND} values. */
    public static final int KIND_FABRIC = 0, KIND_UDP_TUNNEL = 1;
    /** {@link #OPER_STATUS} values (PAOS's). */
    public static final int STATUS_UP = 1, STATUS_DOWN = 2;
}
