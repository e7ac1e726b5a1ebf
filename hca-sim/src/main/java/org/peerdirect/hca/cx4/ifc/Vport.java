package org.peerdirect.hca.cx4.ifc;

/**
 * The port as the function's vport shows it: {@code QUERY_HCA_VPORT_CONTEXT} ({@code struct
 * mlx5_ifc_hca_vport_context_bits} at output byte 0x10: port states, GUIDs, LID, SM LID) and
 * {@code QUERY_HCA_VPORT_GID} (the GID table entries at output byte 0x10). Input: {@code port_num}
 * at byte 0x0b ({@code dw2[7:0]} after the other_vport/vport_number half), the GID index at 0x0e.
 */
public final class Vport {

    private Vport() {
    }

    public static final IfcField IN_PORT_NUM = new IfcField(0x50, 4);
    public static final IfcField IN_GID_INDEX = new IfcField(0x70, 16);
    public static final long OUT_CONTEXT = 0x10;
    public static final int CONTEXT_OUT_LEN = 0x10 + 0x200;
    public static final IfcField PORT_PHYSICAL_STATE = new IfcField(0x110, 4);
    public static final IfcField PORT_STATE = new IfcField(0x118, 4);
    public static final IfcField VPORT_STATE = new IfcField(0x11c, 4);
    public static final long PORT_GUID = 0x30;
    public static final long NODE_GUID = 0x38;
    public static final IfcField LID = new IfcField(0x300, 16);
    public static final IfcField SM_LID = new IfcField(0x320, 16);
    public static final long OUT_GID = 0x10;
    public static final int GID_OUT_LEN = 0x20;

    /** IB port states ({@code enum ib_port_state}) and physical states. */
    public static final int PORT_DOWN = 1;
    public static final int PORT_ACTIVE = 4;
    public static final int PHYS_LINK_UP = 5;
    public static final int PHYS_DISABLED = 3;
}
