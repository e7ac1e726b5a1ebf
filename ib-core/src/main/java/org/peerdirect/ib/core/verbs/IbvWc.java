package org.peerdirect.ib.core.verbs;

/** {@code struct ibv_wc}, filled by {@link IbvCq#poll}. Reuse an array of them. */
public final class IbvWc {
    /** {@code IBV_WC_GRH}: a UD receive buffer starts with the 40-byte GRH. */
    public static final int WC_GRH = 1;
    /** {@code IBV_WC_WITH_IMM}. */
    public static final int WC_WITH_IMM = 1 << 1;

    public long wrId;
    public IbvWcStatus status = IbvWcStatus.SUCCESS;
    public IbvWcOpcode opcode = IbvWcOpcode.SEND;
    public int vendorErr;
    public int byteLen;
    public int immData;
    public int qpNum;
    public int srcQp;
    public int wcFlags;
    public int slid;

    public void copyFrom(IbvWc o) {
        wrId = o.wrId;
        status = o.status;
        opcode = o.opcode;
        vendorErr = o.vendorErr;
        byteLen = o.byteLen;
        immData = o.immData;
        qpNum = o.qpNum;
        srcQp = o.srcQp;
        wcFlags = o.wcFlags;
        slid = o.slid;
    }

    @Override
    public String toString() {
        return String.format("wc{wr_id=%d, status=%s (%s), opcode=%s, byte_len=%d, qp=0x%x%s}", wrId, status, status.str(),
                opcode, byteLen, qpNum, (wcFlags & WC_WITH_IMM) != 0 ? String.format(", imm=0x%x", immData) : "");
    }
}
