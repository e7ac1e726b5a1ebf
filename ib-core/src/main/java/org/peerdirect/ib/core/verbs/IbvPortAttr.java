package org.peerdirect.ib.core.verbs;

/** {@code struct ibv_port_attr} (the fields ibv_devinfo prints). State: 1 DOWN … 4 ACTIVE. */
public record IbvPortAttr(int state, int maxMtu, int activeMtu, int gidTblLen, int portCapFlags, long maxMsgSz,
        int pkeyTblLen, int lid, int smLid, int lmc, int maxVlNum, int smSl, int activeWidth, int activeSpeed,
        int physState, int linkLayer) {

    public static final int PORT_DOWN = 1;
    public static final int PORT_ACTIVE = 4;
    public static final int LINK_LAYER_INFINIBAND = 1;
    /** {@code IBV_LINK_LAYER_ETHERNET}: RoCE; addressing by GID only. */
    public static final int LINK_LAYER_ETHERNET = 2;

    public static String stateName(int s) {
        return switch (s) {
            case 1 -> "PORT_DOWN";
            case 2 -> "PORT_INIT";
            case 3 -> "PORT_ARMED";
            case 4 -> "PORT_ACTIVE";
            default -> "PORT_UNKNOWN";
        };
    }
}
