package org.peerdirect.ssd.regs;

/**
 * NVMe 1.4 controller registers in BAR0 and their fields, the names of
 * {@code include/linux/nvme.h} ({@code enum nvme_regs} and friends): what the device implements
 * and the driver programs, shared as the header is shared between the kernel and the hardware's
 * specification. Registers are little-endian.
 */
public final class NvmeRegs {

    private NvmeRegs() {
    }

    public static final int NVME_REG_CAP = 0x00;
    public static final int NVME_REG_VS = 0x08;
    public static final int NVME_REG_CC = 0x14;
    public static final int NVME_REG_CSTS = 0x1c;
    public static final int NVME_REG_PMRCAP = 0xe00;
    public static final int NVME_REG_PMRCTL = 0xe04;
    public static final int NVME_REG_PMRSTS = 0xe08;
    public static final int NVME_REG_PMREBS = 0xe0c;
    public static final int NVME_REG_PMRSWTP = 0xe10;

    /** {@code CAP.PMRS}: the controller has a persistent memory region. */
    public static final long NVME_CAP_PMRS = 1L << 56;
    public static final int NVME_CC_ENABLE = 1;
    /** {@code CC.SHN} normal shutdown notification (bits 15:14 = 01b). */
    public static final int NVME_CC_SHN_NORMAL = 1 << 14;
    public static final int NVME_CC_SHN_MASK = 3 << 14;
    public static final int NVME_CSTS_RDY = 1;
    public static final int NVME_CSTS_CFS = 1 << 1;
    /** {@code CSTS.SHST} shutdown processing complete (bits 3:2 = 10b). */
    public static final int NVME_CSTS_SHST_CMPLT = 2 << 2;
    public static final int NVME_CSTS_SHST_MASK = 3 << 2;
    /** {@code PMRCAP}: read and write data support, BIR in bits 7:5, PMRWBM in 13:10, PMRTO in 23:16. */
    public static final int PMRCAP_RDS = 1 << 3;
    public static final int PMRCAP_WDS = 1 << 4;
    public static final int PMRCAP_BIR_SHIFT = 5;
    public static final int PMRCAP_PMRWBM_SHIFT = 10;
    /** PMRWBM bit 0: the completion of a memory read from the PMR ensures prior PMR writes are persistent. */
    public static final int PMRWBM_READ_PMR = 1;
    /** PMRWBM bit 1: a read of PMRSTS completes only once prior PMR writes are persistent. */
    public static final int PMRWBM_READ_PMRSTS = 2;
    public static final int PMRCAP_PMRTO_SHIFT = 16;
    public static final int PMRCTL_EN = 1;
    /** {@code PMRSTS.NRDY}: the PMR is not ready. */
    public static final int PMRSTS_NRDY = 1 << 8;
    /** {@code PMRSTS.ERR} bits 7:0: the media failed to take a barrier (the file could not be written). */
    public static final int PMRSTS_ERR_MASK = 0xff;
}
