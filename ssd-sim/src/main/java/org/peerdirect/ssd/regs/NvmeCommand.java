package org.peerdirect.ssd.regs;

import static org.peerdirect.ssd.regs.NvmeRegs.LE16;
import static org.peerdirect.ssd.regs.NvmeRegs.LE32;
import static org.peerdirect.ssd.regs.NvmeRegs.LE64;

import java.lang.foreign.MemorySegment;

/**
 * The admin queue's descriptors as bytes in host memory, the layouts of {@code include/linux/nvme.h}
 * ({@code struct nvme_common_command}, {@code struct nvme_completion}, {@code struct nvme_id_ctrl})
 * and their names: a 64-byte submission queue entry the driver writes, a 16-byte completion queue
 * entry the controller writes with its phase tag, the admin opcodes, the status codes and the
 * asynchronous event encodings. Little-endian.
 */
public final class NvmeCommand {

    private NvmeCommand() {
    }

    // ---- struct nvme_common_command (64 bytes)
    public static final int SQE_SIZE = 64;
    /** CDW0: opcode bits 7:0, FUSE bits 9:8, PSDT bits 15:14, command identifier bits 31:16. */
    public static final int SQE_OPCODE = 0;
    public static final int SQE_FLAGS = 1;
    public static final int SQE_CID = 2;
    public static final int SQE_NSID = 4;
    public static final int SQE_MPTR = 16;
    /** Data pointer: PRP entry 1 and 2. */
    public static final int SQE_PRP1 = 24;
    public static final int SQE_PRP2 = 32;
    public static final int SQE_CDW10 = 40;
    public static final int SQE_CDW11 = 44;
    /** FUSE (bits 1:0 of byte 1) and PSDT (bits 7:6): both 0 for an admin command with PRPs. */
    public static final int FLAGS_FUSE_MASK = 0x03;
    public static final int FLAGS_PSDT_MASK = 0xc0;

    public static int opcode(MemorySegment sqe) {
        return sqe.get(java.lang.foreign.ValueLayout.JAVA_BYTE, SQE_OPCODE) & 0xff;
    }

    public static int flags(MemorySegment sqe) {
        return sqe.get(java.lang.foreign.ValueLayout.JAVA_BYTE, SQE_FLAGS) & 0xff;
    }

    public static int cid(MemorySegment sqe) {
        return sqe.get(LE16, SQE_CID) & 0xffff;
    }

    public static int nsid(MemorySegment sqe) {
        return sqe.get(LE32, SQE_NSID);
    }

    public static long prp1(MemorySegment sqe) {
        return sqe.get(LE64, SQE_PRP1);
    }

    public static long prp2(MemorySegment sqe) {
        return sqe.get(LE64, SQE_PRP2);
    }

    public static int cdw10(MemorySegment sqe) {
        return sqe.get(LE32, SQE_CDW10);
    }

    public static int cdw11(MemorySegment sqe) {
        return sqe.get(LE32, SQE_CDW11);
    }

    /** Writes an admin command's CDW0 (opcode, FUSE 0, PRPs, {@code cid}) and NSID into a cleared entry. */
    public static void setHeader(MemorySegment sqe, int opcode, int cid, int nsid) {
        sqe.set(java.lang.foreign.ValueLayout.JAVA_BYTE, SQE_OPCODE, (byte) opcode);
        sqe.set(java.lang.foreign.ValueLayout.JAVA_BYTE, SQE_FLAGS, (byte) 0);
        sqe.set(LE16, SQE_CID, (short) cid);
        sqe.set(LE32, SQE_NSID, nsid);
    }

    // ---- struct nvme_completion (16 bytes)
    public static final int CQE_SIZE = 16;
    /** DW0: command specific result. */
    public static final int CQE_RESULT = 0;
    public static final int CQE_SQ_HEAD = 8;
    public static final int CQE_SQ_ID = 10;
    public static final int CQE_CID = 12;
    /** Phase tag bit 0, status field bits 15:1: SC bits 8:1, SCT bits 11:9, CRD 13:12, M 14, DNR 15. */
    public static final int CQE_STATUS = 14;

    public static int cqeStatusField(MemorySegment cqe) {
        return cqe.get(LE16, CQE_STATUS) & 0xffff;
    }

    /** The status of a CQE as Linux reads it: {@code le16_to_cpu(cqe->status) >> 1} (SC, SCT, CRD, M, DNR). */
    public static int status(MemorySegment cqe) {
        return cqeStatusField(cqe) >>> 1;
    }

    public static boolean phase(MemorySegment cqe) {
        return (cqeStatusField(cqe) & 1) != 0;
    }

    // ---- enum nvme_admin_opcode
    public static final int nvme_admin_delete_sq = 0x00;
    public static final int nvme_admin_create_sq = 0x01;
    public static final int nvme_admin_get_log_page = 0x02;
    public static final int nvme_admin_delete_cq = 0x04;
    public static final int nvme_admin_create_cq = 0x05;
    public static final int nvme_admin_identify = 0x06;
    public static final int nvme_admin_abort_cmd = 0x08;
    public static final int nvme_admin_set_features = 0x09;
    public static final int nvme_admin_get_features = 0x0a;
    public static final int nvme_admin_async_event = 0x0c;
    public static final int nvme_admin_keep_alive = 0x18;

    // ---- identify
    public static final int NVME_IDENTIFY_DATA_SIZE = 4096;
    public static final int NVME_ID_CNS_NS = 0x00;
    public static final int NVME_ID_CNS_CTRL = 0x01;
    public static final int NVME_ID_CNS_NS_ACTIVE_LIST = 0x02;
    /** {@code struct nvme_id_ctrl}: vid, ssvid, sn[20], mn[40], fr[8], ..., mdts, cntlid, ver, ..., aerl, ..., sqes, cqes, nn. */
    public static final int ID_CTRL_VID = 0;
    public static final int ID_CTRL_SSVID = 2;
    public static final int ID_CTRL_SN = 4;
    public static final int ID_CTRL_SN_LEN = 20;
    public static final int ID_CTRL_MN = 24;
    public static final int ID_CTRL_MN_LEN = 40;
    public static final int ID_CTRL_FR = 64;
    public static final int ID_CTRL_FR_LEN = 8;
    public static final int ID_CTRL_MDTS = 77;
    public static final int ID_CTRL_CNTLID = 78;
    public static final int ID_CTRL_VER = 80;
    public static final int ID_CTRL_OACS = 256;
    public static final int ID_CTRL_ACL = 258;
    /** Asynchronous Event Request Limit, 0's based. */
    public static final int ID_CTRL_AERL = 259;
    public static final int ID_CTRL_SQES = 512;
    public static final int ID_CTRL_CQES = 513;
    public static final int ID_CTRL_NN = 516;

    // ---- features
    public static final int NVME_FEAT_NUM_QUEUES = 0x07;
    public static final int NVME_FEAT_ASYNC_EVENT = 0x0b;

    // ---- status: SCT bits 10:8 of the field Linux reads, SC bits 7:0, DNR bit 14
    public static final int NVME_SC_SUCCESS = 0x00;
    public static final int NVME_SC_INVALID_OPCODE = 0x01;
    public static final int NVME_SC_INVALID_FIELD = 0x02;
    public static final int NVME_SC_CMDID_CONFLICT = 0x03;
    public static final int NVME_SC_DATA_XFER_ERROR = 0x04;
    public static final int NVME_SC_INTERNAL = 0x06;
    public static final int NVME_SC_ABORT_REQ = 0x07;
    public static final int NVME_SC_INVALID_NS = 0x0b;
    public static final int NVME_SC_PRP_INVALID_OFFSET = 0x13;
    /** Command specific (SCT 1): Asynchronous Event Request Limit Exceeded. */
    public static final int NVME_SC_ASYNC_LIMIT = 0x105;
    public static final int NVME_SC_DNR = 0x4000;
    public static final int NVME_SCT_MASK = 0x700;
    public static final int NVME_SC_MASK = 0xff;

    // ---- asynchronous events: DW0 = type bits 2:0, info bits 15:8, log page bits 23:16
    public static final int NVME_AER_ERROR = 0;
    /** Error status: a write to a doorbell of a queue that does not exist. */
    public static final int NVME_AER_ERROR_INVALID_DB_REG = 0x00;
    /** Error status: a doorbell value outside the queue, or a head past what the controller posted. */
    public static final int NVME_AER_ERROR_INVALID_DB_VALUE = 0x01;
    public static final int NVME_LOG_ERROR = 0x01;

    public static int aerResult(int type, int info, int logPage) {
        return (type & 7) | ((info & 0xff) << 8) | ((logPage & 0xff) << 16);
    }

    /** A status as text for messages: {@code "Invalid Field in Command (sct 0 sc 0x02)"}. */
    public static String statusName(int status) {
        int sc = status & NVME_SC_MASK;
        int sct = (status & NVME_SCT_MASK) >>> 8;
        String n = switch (status & (NVME_SCT_MASK | NVME_SC_MASK)) {
            case NVME_SC_SUCCESS -> "Successful Completion";
            case NVME_SC_INVALID_OPCODE -> "Invalid Command Opcode";
            case NVME_SC_INVALID_FIELD -> "Invalid Field in Command";
            case NVME_SC_CMDID_CONFLICT -> "Command ID Conflict";
            case NVME_SC_DATA_XFER_ERROR -> "Data Transfer Error";
            case NVME_SC_INTERNAL -> "Internal Error";
            case NVME_SC_ABORT_REQ -> "Command Abort Requested";
            case NVME_SC_INVALID_NS -> "Invalid Namespace or Format";
            case NVME_SC_PRP_INVALID_OFFSET -> "PRP Offset Invalid";
            case NVME_SC_ASYNC_LIMIT -> "Asynchronous Event Request Limit Exceeded";
            default -> "status";
        };
        return String.format("%s (sct %d sc 0x%02x)", n, sct, sc);
    }
}
