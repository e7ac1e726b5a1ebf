package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_eqe}: 32 bytes, type and subtype, 24 bytes of event data, the owner bit in
 * the last byte. The hardware writes an EQE with the owner bit of its pass over the ring
 * ({@code producer & nent}); software owns it when that bit equals its own pass
 * ({@code next_eqe_sw}); the ring starts with every owner bit set.
 */
public final class Eqe {

    public static final int SIZE = 32;
    public static final int TYPE = 0x01;
    public static final int SUBTYPE = 0x03;
    public static final int DATA = 0x04;
    public static final int DATA_SIZE = 24;
    public static final int OWNER = 0x1f;
    public static final int OWNER_BIT = 0x80;

    /** be32 (24 bits) in completion, QP, SRQ and CQ-error events. */
    public static final int COMP_CQN = 0x04;
    public static final int QP_QPN = 0x04;
    public static final int SRQ_SRQN = 0x04;
    public static final int CQ_ERR_CQN = 0x04;
    public static final int CQ_ERR_SYNDROME = 0x0b;
    /** The CQ-error syndrome of an overrun (the other one, an access violation, the model never raises). */
    public static final int CQ_ERR_OVERRUN = 0x01;
    /** be16, u8, be64: the command-completion event. */
    public static final int CMD_TOKEN = 0x04;
    public static final int CMD_STATUS = 0x09;
    public static final int CMD_OUT_PARAM = 0x0c;
    /** be32: the port in bits 31..28. */
    public static final int PORT_CHANGE_PORT = 0x0c;

    private Eqe() {
    }
}
