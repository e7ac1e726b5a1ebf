package org.peerdirect.mlx4.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.peerdirect.hca.cx3.ifc.IcmMap;
import org.peerdirect.hca.cx3.ifc.InitHca;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.QueryAdapter;
import org.peerdirect.hca.cx3.ifc.QueryDevCap;
import org.peerdirect.hca.cx3.ifc.QueryFw;

/**
 * The firmware commands of bring-up and teardown ({@code fw.c}): each builds its mailbox, runs
 * the command and parses the answer into the driver's own types.
 */
public final class Fw {

    /** {@code struct mlx4_fw}: what QUERY_FW said. */
    public record FwInfo(int major, int minor, int subminor, int cmdIfRev, int maxCmds, int fwPages) {
        public String version() {
            return major + "." + minor + "." + subminor;
        }
    }

    /** {@code struct mlx4_dev_cap}: the limits the driver sizes everything with. */
    public record DevCap(int maxQps, int reservedQps, int maxSrqs, int reservedSrqs, int maxCqs, int reservedCqs, int maxMpts,
            int reservedMrws, int maxEqs, int reservedEqs, int reservedMtts, int maxCqSz, int maxQpSz, int maxSrqSz, int maxReqQp,
            int maxResQp, int numPorts, int reservedUars, int maxSqSg, int maxRqSg, int maxSqDescSz, int maxPds, int reservedPds,
            int qpcEntrySz, int cqcEntrySz, int srqEntrySz, int eqcEntrySz, int mttEntrySz, int dmptEntrySz, int reservedLkey,
            long maxIcmSz, int bfRegSize, int bfRegsPerPage) {
    }

    /** Where INIT_HCA puts each table ({@code struct mlx4_init_hca_param}). */
    public record InitHcaParam(long qpcBase, int logNumQps, long srqcBase, int logNumSrqs, long cqcBase, int logNumCqs, long eqcBase,
            int logNumEqs, long dmptBase, int logMptSz, long mttBase) {
    }

    private final Cmd cmd;
    private final DmaCoherentPages dma;

    public Fw(Cmd cmd, DmaCoherentPages dma) {
        this.cmd = cmd;
        this.dma = dma;
    }

    /** Runs {@code op} with an output mailbox and hands its bytes to {@code parse}. */
    private <T> T query(int op, int inMod, java.util.function.Function<MemorySegment, T> parse) {
        DmaCoherentPages.Page box = dma.alloc();
        try {
            cmd.box(0, box.iova(), inMod, 0, op);
            return parse.apply(box.mem());
        } finally {
            dma.free(box);
        }
    }

    /** {@code mlx4_QUERY_FW}. */
    public FwInfo queryFw() {
        return query(Mlx4Cmd.QUERY_FW, 0, o -> {
            long v = o.get(BE64, QueryFw.FW_VER);
            return new FwInfo((int) (v >>> 32) & 0xffff, (int) (v >>> 16) & 0xffff, (int) v & 0xffff, o.get(BE16, QueryFw.CMD_IF_REV) & 0xffff,
                    1 << (o.get(U8, QueryFw.MAX_CMD) & 0x1f), o.get(BE16, QueryFw.FW_PAGES) & 0xffff);
        });
    }

    private static int u8(MemorySegment o, int off) {
        return o.get(U8, off) & 0xff;
    }

    private static int u16(MemorySegment o, int off) {
        return o.get(BE16, off) & 0xffff;
    }

    /** {@code mlx4_QUERY_DEV_CAP}. */
    public DevCap queryDevCap() {
        return query(Mlx4Cmd.QUERY_DEV_CAP, 0, o -> {
            int rsvdUars = u8(o, QueryDevCap.RSVD_UAR) >>> 4;
            int rsvdEqs = Math.max(rsvdUars * 4, 1 << (u8(o, QueryDevCap.RSVD_EQ) & 0xf)); // 4 EQ doorbells per reserved UAR
            boolean bf = (u8(o, QueryDevCap.BF) & 0x80) != 0;
            return new DevCap(1 << (u8(o, QueryDevCap.MAX_QP) & 0x1f), 1 << (u8(o, QueryDevCap.RSVD_QP) & 0xf),
                    1 << (u8(o, QueryDevCap.MAX_SRQ) & 0x1f), 1 << (u8(o, QueryDevCap.RSVD_SRQ) >>> 4),
                    1 << (u8(o, QueryDevCap.MAX_CQ) & 0x1f), 1 << (u8(o, QueryDevCap.RSVD_CQ) & 0xf),
                    1 << (u8(o, QueryDevCap.MAX_MPT) & 0x3f), 1 << (u8(o, QueryDevCap.RSVD_MRW) & 0xf),
                    1 << (u8(o, QueryDevCap.MAX_EQ) & 0xf), rsvdEqs, 1 << (u8(o, QueryDevCap.RSVD_MTT) >>> 4),
                    1 << u8(o, QueryDevCap.MAX_CQ_SZ), 1 << u8(o, QueryDevCap.MAX_QP_SZ), 1 << u8(o, QueryDevCap.MAX_SRQ_SZ),
                    1 << (u8(o, QueryDevCap.MAX_REQ_QP) & 0x3f), 1 << (u8(o, QueryDevCap.MAX_RES_QP) & 0x3f),
                    u8(o, QueryDevCap.VL_PORT) & 0xf, rsvdUars, u8(o, QueryDevCap.MAX_SG_SQ), u8(o, QueryDevCap.MAX_SG_RQ),
                    u16(o, QueryDevCap.MAX_DESC_SZ_SQ), 1 << (u8(o, QueryDevCap.MAX_PD) & 0x3f), u8(o, QueryDevCap.RSVD_PD) >>> 4,
                    u16(o, QueryDevCap.QPC_ENTRY_SZ), u16(o, QueryDevCap.CQC_ENTRY_SZ), u16(o, QueryDevCap.SRQ_ENTRY_SZ),
                    u16(o, QueryDevCap.EQC_ENTRY_SZ), u16(o, QueryDevCap.MTT_ENTRY_SZ), u16(o, QueryDevCap.D_MPT_ENTRY_SZ),
                    o.get(BE32, QueryDevCap.RSVD_LKEY), o.get(BE64, QueryDevCap.MAX_ICM_SZ),
                    bf ? 1 << (u8(o, QueryDevCap.LOG_BF_REG_SZ) & 0x1f) : 0, bf ? 1 << (u8(o, QueryDevCap.LOG_MAX_BF_REGS_PER_PAGE) & 0x3f) : 0);
        });
    }

    /** {@code mlx4_QUERY_ADAPTER}: the board id from the Mellanox VSD, or "" when another vendor wrote it. */
    public String queryAdapter() {
        return query(Mlx4Cmd.QUERY_ADAPTER, 0, o -> {
            if (u16(o, QueryAdapter.VSD_VENDOR_ID) != 0x15b3) {
                return "";
            }
            byte[] id = o.asSlice(QueryAdapter.VSD_BOARD_ID, QueryAdapter.BOARD_ID_LEN).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            int n = 0;
            while (n < id.length && id[n] != 0) {
                n++;
            }
            return new String(id, 0, n, StandardCharsets.US_ASCII);
        });
    }

    /**
     * {@code mlx4_map_cmd}: {@code op} (MAP_FA, MAP_ICM_AUX, MAP_ICM) over {@code pages} 4 KiB
     * pages, at ICM address {@code virt} onwards (-1: no address, the firmware area and aux),
     * as many mailboxes as needed.
     */
    public void mapCmd(int op, List<DmaCoherentPages.Page> pages, long virt) {
        DmaCoherentPages.Page box = dma.alloc();
        try {
            int n = 0;
            for (int i = 0; i < pages.size(); i++) {
                long v = virt < 0 ? -1L : virt + (long) i * IcmMap.ICM_PAGE_SIZE;
                box.mem().set(BE64, (long) n * IcmMap.ENTRY_SIZE + IcmMap.VIRT, v);
                box.mem().set(BE64, (long) n * IcmMap.ENTRY_SIZE + IcmMap.PHYS, pages.get(i).iova()); // log2(size) - 12 = 0
                if (++n == IcmMap.MAX_ENTRIES || i == pages.size() - 1) {
                    cmd.box(box.iova(), 0, n, 0, op);
                    n = 0;
                }
            }
        } finally {
            dma.free(box);
        }
    }

    /** {@code mlx4_SET_ICM_SIZE}: the auxiliary pages the firmware needs for that much ICM. */
    public int setIcmSize(long icmSize) {
        return (int) cmd.imm(icmSize, 0, 0, Mlx4Cmd.SET_ICM_SIZE);
    }

    /** {@code mlx4_INIT_HCA}. */
    public void initHca(InitHcaParam p) {
        DmaCoherentPages.Page box = dma.alloc();
        try {
            MemorySegment in = box.mem();
            in.set(U8, InitHca.VERSION, (byte) InitHca.VERSION_2);
            in.set(U8, InitHca.CACHELINE_SZ, (byte) (6 << 5)); // 64-byte cache lines
            put(in, InitHca.QPC_BASE, p.qpcBase(), InitHca.LOG_NUM_QPS, p.logNumQps());
            put(in, InitHca.SRQC_BASE, p.srqcBase(), InitHca.LOG_NUM_SRQS, p.logNumSrqs());
            put(in, InitHca.CQC_BASE, p.cqcBase(), InitHca.LOG_NUM_CQS, p.logNumCqs());
            put(in, InitHca.EQC_BASE, p.eqcBase(), InitHca.LOG_NUM_EQS, p.logNumEqs());
            in.set(BE64, InitHca.DMPT_BASE, p.dmptBase());
            in.set(U8, InitHca.LOG_MPT_SZ, (byte) p.logMptSz());
            in.set(BE64, InitHca.MTT_BASE, p.mttBase());
            in.set(U8, InitHca.UAR_PAGE_SZ, (byte) 0);
            in.set(U8, InitHca.LOG_UAR_SZ, (byte) 3);
            cmd.box(box.iova(), 0, 0, 0, Mlx4Cmd.INIT_HCA);
        } finally {
            dma.free(box);
        }
    }

    private static void put(MemorySegment in, int baseOff, long base, int logOff, int log) {
        in.set(BE64, baseOff, base);
        in.set(U8, logOff, (byte) log);
    }
}
