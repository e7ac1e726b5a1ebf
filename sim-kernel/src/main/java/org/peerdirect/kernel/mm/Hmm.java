package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.HPAGE_ORDER;
import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;

import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * Heterogeneous memory management, as mm/hmm.c: {@code hmm_range_fault}, the walk a mirroring
 * device driver (ODP) makes to learn which frames back a range.
 *
 * <p>Holds no state. The walk runs under the mmap lock in read mode and takes no page
 * references: the caller's MMU interval notifier, with its sequence, says whether the result is
 * still valid.
 */
final class Hmm {

    private Hmm() {
    }

    /**
     * @see AddressSpace#hmmRangeFault
     * @see "hmm_range_fault() in mm/hmm.c"
     */
    static void hmmRangeFault(AddressSpace mm, HmmRange range) {
        if (range.notifier.mm() != mm || range.start < range.notifier.start() || range.end > range.notifier.end()) {
            throw new KernelException(Errno.EINVAL, String.format("hmm range 0x%x-0x%x is outside its notifier %s",
                    range.start, range.end, range.notifier));
        }
        boolean fault = (range.defaultFlags & HmmRange.HMM_PFN_REQ_FAULT) != 0;
        boolean write = (range.defaultFlags & HmmRange.HMM_PFN_REQ_WRITE) != 0;
        Memory.withFaultRetry(mm, () -> {
            mm.alive();
            if (range.notifier.readRetry(range.notifierSeq)) {
                throw new KernelException(Errno.EBUSY, "hmm_range_fault: the range was invalidated; retry from mmu_interval_read_begin");
            }
            for (int i = 0; i < range.hmmPfns.length; i++) {
                long va = range.start + ((long) i << PAGE_SHIFT);
                Vma v = Mmap.findVma(mm, va);
                if (v == null || v.kind() == Vma.Kind.DEVICE) {
                    throw new KernelException(Errno.EFAULT, String.format("hmm_range_fault: 0x%x is %s", va,
                            v == null ? "not mapped" : "in device mapping " + v.name()));
                }
                long e = mm.pt.lookup(va);
                if (fault) {
                    if (!v.readable() || write && !v.writable()) {
                        throw new KernelException(Errno.EPERM, String.format("hmm_range_fault: 0x%x in %s does not allow %s",
                                va, v.name(), write ? "writing" : "reading"));
                    }
                    long need = write ? PageTable.PRESENT | PageTable.WRITE : PageTable.PRESENT;
                    if ((e & need) != need) {
                        Memory.resolve(mm, va, write);
                        e = mm.pt.lookup(va);
                    }
                }
                if ((e & PageTable.PRESENT) == 0) {
                    range.hmmPfns[i] = 0;
                    continue;
                }
                boolean huge = (e & PageTable.HUGE) != 0;
                range.hmmPfns[i] = PageTable.pfnAt(e, va) | HmmRange.HMM_PFN_VALID
                        | ((e & PageTable.WRITE) != 0 && v.writable() ? HmmRange.HMM_PFN_WRITE : 0)
                        | ((long) (huge ? HPAGE_ORDER : 0) << HmmRange.HMM_PFN_ORDER_SHIFT);
            }
            if (range.notifier.readRetry(range.notifierSeq)) {
                throw new KernelException(Errno.EBUSY, "hmm_range_fault: the range was invalidated during the walk; retry");
            }
        });
    }
}
