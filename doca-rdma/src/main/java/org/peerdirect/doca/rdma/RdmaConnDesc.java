package org.peerdirect.doca.rdma;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * The connection details {@code doca_rdma_export} hands out and {@code doca_rdma_connect} takes
 * [model: DOCA's format is not public]: {@link #SIZE} bytes, big-endian: magic {@code "DRC1"}, the
 * QP number, the first PSN, the port's GID (RoCE v2, GID index 0), the device's node GUID.
 */
record RdmaConnDesc(int qpn, int psn, byte[] gid, long nodeGuid) {

    static final int MAGIC = 0x44524331; // "DRC1"
    static final int SIZE = 4 + 4 + 4 + 16 + 8;

    byte[] toBytes() {
        return ByteBuffer.allocate(SIZE).order(ByteOrder.BIG_ENDIAN).putInt(MAGIC).putInt(qpn).putInt(psn).put(gid).putLong(nodeGuid).array();
    }

    /** INVALID_VALUE for bytes that are no connection details of ours (length, magic, a QP number past 24 bits). */
    static RdmaConnDesc parse(String w, byte[] b) {
        DocaException.check(b != null && b.length == SIZE, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": connection details of " + (b == null ? "null" : b.length + " bytes") + " (" + SIZE + " expected)");
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.BIG_ENDIAN);
        DocaException.check(bb.getInt() == MAGIC, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": not DOCA RDMA connection details (bad magic)");
        int qpn = bb.getInt();
        int psn = bb.getInt();
        DocaException.check((qpn & ~0xffffff) == 0 && qpn != 0 && (psn & ~0xffffff) == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                String.format("%s: QP number 0x%x or PSN 0x%x out of range", w, qpn, psn));
        byte[] gid = new byte[16];
        bb.get(gid);
        return new RdmaConnDesc(qpn, psn, gid, bb.getLong());
    }
}
