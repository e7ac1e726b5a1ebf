package org.peerdirect.ssd.regs;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * NVMe 1.4 / 2.0 controller registers in BAR0 and their fields, the names of
 * {@code include/linux/nvme.h} ({@code enum nvme_regs} and friends): what the device implements
 * and the driver programs, shared as the header is shared between the kernel and the hardware's
 * specification. Registers are little-endian; the 64-bit ones ({@code CAP}, {@code ASQ},
 * {@code ACQ}) may be written as two 32-bit halves, low first ({@code lo_hi_writeq}).
 */
public final class NvmeRegs {

    private NvmeRegs() {
    }

    /** Registers and descriptors are little-endian. */
    public static final ValueLayout.OfInt LE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    public static final ValueLayout.OfLong LE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    public static final ValueLayout.OfShort LE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    // ---- enum nvme_regs
    /** Controller Capabilities, 64 bits, read-only. */
    public static final int NVME_REG_CAP = 0x00;
    /** Version, read-only. */
    public static final int NVME_REG_VS = 0x08;
    /** Interrupt Mask Set / Clear: reserved while MSI-X is in use (the host does not touch them). */
    public static final int NVME_REG_INTMS = 0x0c;
    public static final int NVME_REG_INTMC = 0x10;
    /** Controller Configuration. */
    public static final int NVME_REG_CC = 0x14;
    /** Controller Status, read-only. */
    public static final int NVME_REG_CSTS = 0x1c;
    /** NVM Subsystem Reset (reserved when {@code CAP.NSSRS} is 0). */
    public static final int NVME_REG_NSSR = 0x20;
    /** Admin Queue Attributes: ASQS bits 11:0, ACQS bits 27:16, both 0's based. */
    public static final int NVME_REG_AQA = 0x24;
    /** Admin Submission / Completion Queue Base Address, 64 bits, bits 11:0 reserved. */
    public static final int NVME_REG_ASQ = 0x28;
    public static final int NVME_REG_ACQ = 0x30;
    /** Controller Memory Buffer Location / Size (reserved when {@code CAP.CMBS} is 0). */
    public static final int NVME_REG_CMBLOC = 0x38;
    public static final int NVME_REG_CMBSZ = 0x3c;
    public static final int NVME_REG_PMRCAP = 0xe00;
    public static final int NVME_REG_PMRCTL = 0xe04;
    public static final int NVME_REG_PMRSTS = 0xe08;
    public static final int NVME_REG_PMREBS = 0xe0c;
    public static final int NVME_REG_PMRSWTP = 0xe10;
    /** PMR Controller Memory Space Control, lower and upper halves (reserved when {@code PMRCAP.CMSS} is 0). */
    public static final int NVME_REG_PMRMSCL = 0xe14;
    public static final int NVME_REG_PMRMSCU = 0xe18;
    /** The doorbells: SQ y tail at {@code 0x1000 + (2y) * (4 << CAP.DSTRD)}, CQ y head at {@code 0x1000 + (2y+1) * (4 << CAP.DSTRD)}. */
    public static final int NVME_REG_DBS = 0x1000;

    // ---- CAP
    /** {@code CAP.MQES} bits 15:0: maximum queue entries supported, 0's based. */
    public static int capMqes(long cap) {
        return (int) (cap & 0xffff);
    }

    /** {@code CAP.CQR}: queues must be physically contiguous. */
    public static final long NVME_CAP_CQR = 1L << 16;

    /** {@code CAP.TO} bits 31:24: worst-case time for CSTS.RDY to change, in 500 ms units ({@code NVME_CAP_TIMEOUT}). */
    public static int capTimeout(long cap) {
        return (int) ((cap >>> 24) & 0xff);
    }

    /** {@code CAP.DSTRD} bits 35:32: doorbell stride, {@code 4 << DSTRD} bytes ({@code NVME_CAP_STRIDE}). */
    public static int capStride(long cap) {
        return (int) ((cap >>> 32) & 0xf);
    }

    /** {@code CAP.CSS} bit 37: the NVM command set is supported. */
    public static final long NVME_CAP_CSS_NVM = 1L << 37;

    /** {@code CAP.MPSMIN} bits 51:48 and {@code CAP.MPSMAX} bits 55:52: memory page size {@code 2^(12+MPS)}. */
    public static int capMpsMin(long cap) {
        return (int) ((cap >>> 48) & 0xf);
    }

    public static int capMpsMax(long cap) {
        return (int) ((cap >>> 52) & 0xf);
    }

    /** {@code CAP.PMRS}: the controller has a persistent memory region. */
    public static final long NVME_CAP_PMRS = 1L << 56;

    /** The offset of SQ {@code qid}'s tail doorbell ({@code cq} false) or CQ {@code qid}'s head doorbell. */
    public static long doorbell(int qid, boolean cq, int dstrd) {
        return NVME_REG_DBS + (2L * qid + (cq ? 1 : 0)) * (4L << dstrd);
    }

    // ---- CC
    public static final int NVME_CC_ENABLE = 1;
    /** {@code CC.CSS} bits 6:4: I/O command set selected, 000b NVM. */
    public static final int NVME_CC_CSS_SHIFT = 4;
    public static final int NVME_CC_CSS_MASK = 7 << NVME_CC_CSS_SHIFT;
    public static final int NVME_CC_CSS_NVM = 0;
    /** {@code CC.MPS} bits 10:7: host memory page size {@code 2^(12+MPS)}. */
    public static final int NVME_CC_MPS_SHIFT = 7;
    public static final int NVME_CC_MPS_MASK = 0xf << NVME_CC_MPS_SHIFT;
    /** {@code CC.AMS} bits 13:11: arbitration mechanism, 000b round robin. */
    public static final int NVME_CC_AMS_SHIFT = 11;
    public static final int NVME_CC_AMS_MASK = 7 << NVME_CC_AMS_SHIFT;
    /** {@code CC.SHN} bits 15:14: 01b normal, 10b abrupt shutdown notification. */
    public static final int NVME_CC_SHN_NORMAL = 1 << 14;
    public static final int NVME_CC_SHN_ABRUPT = 2 << 14;
    public static final int NVME_CC_SHN_MASK = 3 << 14;
    /** {@code CC.IOSQES} bits 19:16 and {@code CC.IOCQES} bits 23:20: I/O queue entry sizes (2^n), 64 and 16 bytes. */
    public static final int NVME_CC_IOSQES = 6 << 16;
    public static final int NVME_CC_IOCQES = 4 << 20;
    /** The bits of CC that exist (bits 31:24 and 3:1 are reserved). */
    public static final int NVME_CC_DEFINED = 0x00ff_fff1;

    // ---- CSTS
    public static final int NVME_CSTS_RDY = 1;
    /** {@code CSTS.CFS}: a fatal controller error no completion queue could carry; cleared by a controller reset. */
    public static final int NVME_CSTS_CFS = 1 << 1;
    /** {@code CSTS.SHST} bits 3:2: 00b normal operation, 01b shutdown processing occurring, 10b complete. */
    public static final int NVME_CSTS_SHST_NORMAL = 0;
    public static final int NVME_CSTS_SHST_OCCUR = 1 << 2;
    public static final int NVME_CSTS_SHST_CMPLT = 2 << 2;
    public static final int NVME_CSTS_SHST_MASK = 3 << 2;

    // ---- AQA
    public static final int NVME_AQA_ASQS_MASK = 0xfff;
    public static final int NVME_AQA_ACQS_SHIFT = 16;
    /** The bits of AQA that exist. */
    public static final int NVME_AQA_DEFINED = 0x0fff_0fff;

    // ---- PMR
    /** {@code PMRCAP}: read and write data support, BIR in bits 7:5, PMRWBM in 13:10, PMRTO in 23:16, CMSS bit 24. */
    public static final int PMRCAP_RDS = 1 << 3;
    public static final int PMRCAP_WDS = 1 << 4;
    public static final int PMRCAP_BIR_SHIFT = 5;
    public static final int PMRCAP_BIR_MASK = 7;
    /** {@code PMRCAP.PMRTU} bits 9:8: the unit of PMRTO, 00b 500 ms. */
    public static final int PMRCAP_PMRTU_SHIFT = 8;
    public static final int PMRCAP_PMRWBM_SHIFT = 10;
    public static final int PMRCAP_PMRTO_SHIFT = 16;
    /** {@code PMRCAP.CMSS}: the PMR can be part of the controller memory space (PMRMSC). */
    public static final int PMRCAP_CMSS = 1 << 24;
    /** PMRWBM bit 0: the completion of a memory read from the PMR ensures prior PMR writes are persistent. */
    public static final int PMRWBM_READ_PMR = 1;
    /** PMRWBM bit 1: a read of PMRSTS completes only once prior PMR writes are persistent. */
    public static final int PMRWBM_READ_PMRSTS = 2;
    public static final int PMRCTL_EN = 1;
    /** {@code PMRSTS.ERR} bits 7:0: the media failed to take a barrier (the file could not be written). */
    public static final int PMRSTS_ERR_MASK = 0xff;
    /** {@code PMRSTS.NRDY}: the PMR is not ready. */
    public static final int PMRSTS_NRDY = 1 << 8;
    /** {@code PMRSTS.HSTS} bits 11:9: health, 000b normal. */
    public static final int PMRSTS_HSTS_SHIFT = 9;
    /** {@code PMREBS}: PMRSZU bits 3:0 (0 bytes, 1 KiB, 2 MiB, 3 GiB), RBB bit 4, PMRWBZ bits 31:8. */
    public static final int PMREBS_PMRSZU_MIB = 2;
    public static final int PMREBS_PMRWBZ_SHIFT = 8;
    /** {@code PMRSWTP}: PMRSWTU bits 3:0 (0 bytes/s, 1 KiB/s, 2 MiB/s, 3 GiB/s), PMRSWTV bits 31:8. */
    public static final int PMRSWTP_PMRSWTU_GIBS = 3;
    public static final int PMRSWTP_PMRSWTV_SHIFT = 8;
    /** {@code PMRMSCL.CMSE} bit 1 and CBA bits 63:12 (only with {@code PMRCAP.CMSS}). */
    public static final int PMRMSC_CMSE = 1 << 1;
}
