package org.peerdirect.ssd.nvme.host;

import static org.peerdirect.ssd.regs.NvmeRegs.NVME_CAP_PMRS;
import static org.peerdirect.ssd.regs.NvmeRegs.NVME_REG_PMRCAP;
import static org.peerdirect.ssd.regs.NvmeRegs.NVME_REG_PMRCTL;
import static org.peerdirect.ssd.regs.NvmeRegs.NVME_REG_PMRSTS;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRCAP_BIR_MASK;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRCAP_BIR_SHIFT;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRCAP_PMRTO_SHIFT;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRCAP_PMRWBM_SHIFT;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRCTL_EN;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRSTS_ERR_MASK;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRSTS_NRDY;
import static org.peerdirect.ssd.regs.NvmeRegs.PMRWBM_READ_PMRSTS;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A controller's persistent memory region as its registers and its BAR present it (NVMe 1.4
 * §3.1.13-19): {@code PMRCAP} read at probe (the BAR it names in {@code BIR}, the {@code PMRWBM}
 * write barrier mechanism, the {@code PMRTO} enable timeout), {@code PMRCTL.EN} with
 * {@code PMRSTS.NRDY} awaited, the barrier that is a read of {@code PMRSTS} and its errors, the
 * region's bytes by MMIO ({@code memcpy_fromio}/{@code memcpy_toio}) and the CPU's mapping of
 * its pages ({@link PciFunction#ioremap}). Stateless beyond what probe read: thread-safe.
 */
public final class Pmr {

    private final PciFunction fn;
    private final String name;
    private final int bar;
    private final long bytes;
    private final long timeoutNanos;

    /**
     * Reads CAP.PMRS and PMRCAP: the region must exist on a BAR the function implements and offer
     * the PMRSTS-read barrier.
     *
     * @throws KernelException EOPNOTSUPP without a PMR or without that barrier, EINVAL when BIR names no BAR
     */
    public Pmr(PciFunction fn, String name, long cap) {
        this.fn = fn;
        this.name = name;
        if ((cap & NVME_CAP_PMRS) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, name + ": controller at " + fn.bdf() + " has no persistent memory region (CAP.PMRS 0)");
        }
        int pmrcap = fn.read32(0, NVME_REG_PMRCAP);
        this.bar = (pmrcap >>> PMRCAP_BIR_SHIFT) & PMRCAP_BIR_MASK;
        this.bytes = bar > 5 ? 0 : fn.barSize(bar);
        if (bytes == 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: PMRCAP.BIR names BAR %d, which %s does not implement", name, bar, fn.bdf()));
        }
        if ((((pmrcap >>> PMRCAP_PMRWBM_SHIFT) & 0xf) & PMRWBM_READ_PMRSTS) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, name + ": the PMR has no PMRSTS-read write barrier (PMRCAP.PMRWBM bit 1): writes could not be made persistent");
        }
        this.timeoutNanos = (((pmrcap >>> PMRCAP_PMRTO_SHIFT) & 0xff) + 1) * TimeUnit.MILLISECONDS.toNanos(500);
    }

    public int bar() {
        return bar;
    }

    public long bytes() {
        return bytes;
    }

    /** PMRCTL.EN, then PMRSTS.NRDY 0 within PMRCAP.PMRTO (a read of PMRSTS is also a barrier: harmless here). */
    public void enable() {
        fn.write32(0, NVME_REG_PMRCTL, PMRCTL_EN);
        long deadline = System.nanoTime() + timeoutNanos;
        for (int spins = 0;; spins++) {
            int sts = fn.read32(0, NVME_REG_PMRSTS);
            if (sts == -1) {
                throw new KernelException(Errno.ENODEV, name + ": controller gone while enabling the PMR");
            }
            if ((sts & PMRSTS_NRDY) == 0) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new KernelException(Errno.EIO, name + ": PMR not ready after PMRCTL.EN (PMRSTS.NRDY) within PMRCAP.PMRTO");
            }
            if (spins < 100) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(100));
            }
        }
    }

    /** PMRCTL.EN again if something turned it off (after a controller reset: the reset path re-runs the probe's enabling). */
    public void enableIfOff() {
        if ((fn.read32(0, NVME_REG_PMRCTL) & PMRCTL_EN) == 0) {
            fn.write32(0, NVME_REG_PMRCTL, PMRCTL_EN);
        }
    }

    /** PMRCTL.EN 0 (the controller runs its barrier first); nothing once the function is gone. */
    public void disable() {
        if (fn.present()) {
            fn.write32(0, NVME_REG_PMRCTL, 0);
        }
    }

    /**
     * The write barrier: a read of {@code PMRSTS}, which completes once every write posted to the
     * region before it is persistent ({@code PMRCAP.PMRWBM} bit 1).
     *
     * @throws KernelException EIO when the controller reports a PMR error or the PMR is not ready, ENODEV when it is gone
     */
    public void barrier() {
        int sts = fn.read32(0, NVME_REG_PMRSTS);
        if (sts == -1) {
            throw new KernelException(Errno.ENODEV, name + ": controller gone, the barrier did not complete");
        }
        if ((sts & PMRSTS_ERR_MASK) != 0) {
            throw new KernelException(Errno.EIO, String.format("%s: PMR write barrier failed (PMRSTS.ERR 0x%x): the media did not take the writes",
                    name, sts & PMRSTS_ERR_MASK));
        }
        if ((sts & PMRSTS_NRDY) != 0) {
            throw new KernelException(Errno.EIO, name + ": PMR not ready (PMRSTS.NRDY)");
        }
    }

    /**
     * {@code io_remap_pfn_range} of PMR [offset, offset+length): the CPU's mapping of the BAR's pages.
     *
     * @throws KernelException EIO when the BAR does not map (the PMR off, the function gone)
     */
    public MemorySegment ioremap(long offset, long length) {
        try {
            return fn.ioremap(bar, offset, length);
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new KernelException(Errno.EIO, name + ": cannot map PMR 0x" + Long.toHexString(offset) + ": " + e.getMessage());
        }
    }

    private void checkWindow(long offset, long length) {
        if (offset < 0 || length < 0 || offset + length > bytes || offset + length < 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: PMR offset 0x%x length %d is outside the %d-byte region", name, offset, length, bytes));
        }
    }

    /** Reads PMR bytes through the BAR (MMIO, 32 bits at a time), as the kernel's {@code memcpy_fromio}. */
    public byte[] read(long offset, int length) {
        checkWindow(offset, length);
        byte[] out = new byte[length];
        for (int i = 0; i < length;) {
            long word = (offset + i) & -4L;
            int v = fn.read32(bar, word);
            for (int b = (int) ((offset + i) - word); b < 4 && i < length; b++, i++) {
                out[i] = (byte) (v >>> (8 * b));
            }
        }
        return out;
    }

    /** Writes PMR bytes through the BAR (MMIO; partial words read-modify-write), as {@code memcpy_toio}. Posted, not yet persistent. */
    public void write(long offset, byte[] data) {
        checkWindow(offset, data.length);
        for (int i = 0; i < data.length;) {
            long word = (offset + i) & -4L;
            int first = (int) ((offset + i) - word);
            int v = first == 0 && data.length - i >= 4 ? 0 : fn.read32(bar, word);
            for (int b = first; b < 4 && i < data.length; b++, i++) {
                v = (v & ~(0xff << (8 * b))) | ((data[i] & 0xff) << (8 * b));
            }
            fn.write32(bar, word, v);
        }
    }
}
