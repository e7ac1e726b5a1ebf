package org.peerdirect.kernel.mm;

/**
 * {@code struct hmm_range}: the input and output of {@link AddressSpace#hmmRangeFault}.
 * {@code hmmPfns[i]} receives, for page i of [start, end), {@link #HMM_PFN_VALID} and
 * {@link #HMM_PFN_WRITE} flags, the mapping order at {@link #HMM_PFN_ORDER_SHIFT} and the frame
 * number in the low bits, or 0 when the page is not present (snapshot mode).
 */
public final class HmmRange {

    public static final long HMM_PFN_VALID = 1L << 63;
    public static final long HMM_PFN_WRITE = 1L << 62;
    public static final long HMM_PFN_ERROR = 1L << 61;
    public static final int HMM_PFN_ORDER_SHIFT = 56;
    public static final long HMM_PFN_FLAGS = 0xffL << HMM_PFN_ORDER_SHIFT;

    /** Fault missing pages in (default_flags). Without it the walk is a snapshot. */
    public static final int HMM_PFN_REQ_FAULT = 1;
    /** Fault for write: the pages must be writable. */
    public static final int HMM_PFN_REQ_WRITE = 2;

    public final MmuIntervalNotifier notifier;
    public final long start;
    public final long end;
    public final int defaultFlags;
    public final long[] hmmPfns;
    /** Set by the caller from {@link MmuIntervalNotifier#readBegin()} before the call. */
    public long notifierSeq;

    public HmmRange(MmuIntervalNotifier notifier, long start, long end, int defaultFlags) {
        if (start >= end || (start & (Mm.PAGE_SIZE - 1)) != 0 || (end & (Mm.PAGE_SIZE - 1)) != 0) {
            throw new KernelException(KernelException.Errno.EINVAL,
                    String.format("hmm range 0x%x-0x%x is empty or not page aligned", start, end));
        }
        // start < end, so end - start > 0 (unsigned): no overflow, even with start < 0
        long pages = (end - start) >>> Mm.PAGE_SHIFT;
        if (pages > Integer.MAX_VALUE) {
            // the caller allocates hmm_pfns in Linux; here it is a Java array, which cannot be that long
            throw new KernelException(KernelException.Errno.EINVAL, String.format(
                    "hmm range 0x%x-0x%x is %d pages, more than the %d one hmm_range_fault can walk; split it",
                    start, end, pages, Integer.MAX_VALUE));
        }
        this.notifier = notifier;
        this.start = start;
        this.end = end;
        this.defaultFlags = defaultFlags;
        this.hmmPfns = new long[(int) pages];
    }

    public static long pfn(long hmmPfn) {
        return hmmPfn & ~HMM_PFN_FLAGS;
    }

    public static int order(long hmmPfn) {
        return (int) ((hmmPfn >>> HMM_PFN_ORDER_SHIFT) & 0x1f);
    }
}
