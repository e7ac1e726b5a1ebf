package org.peerdirect.kernel.iommu;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * One side of one transfer, translated once: the runs (segment, offset, length) its bytes lie
 * in, in IOVA order, each as long as the memory behind consecutive IOVA pages stays contiguous
 * in one segment (frames that follow on, pages of one BAR, an aperture page whose device memory
 * covers the following BAR pages). {@link DmaTranslation#translate} fills it; {@link DmaEngine}
 * copies run by run.
 *
 * <p>Lifetime and ownership: one pair per thread ({@link #mine}), reused by every transfer of
 * that thread, so the data path allocates nothing once the arrays have grown to the largest
 * transfer seen. The runs are valid only while the domain's read lock taken before the
 * translation is still held: an unmap waits for that lock, so it cannot complete between the
 * translation and the last byte copied through these runs, and the next transfer translates
 * again ({@link #reset} first). Never handed to another thread.
 */
final class DmaRuns {

    /** Per thread: [0] the source (or only) side, [1] a peer copy's destination side. */
    private static final ThreadLocal<DmaRuns[]> MINE = ThreadLocal.withInitial(() -> new DmaRuns[] {new DmaRuns(), new DmaRuns()});

    MemorySegment[] seg = new MemorySegment[16];
    long[] off = new long[16];
    long[] len = new long[16];
    /** Runs in use. */
    int count;
    /** Bytes of the runs that lie in another function's BAR (peer to peer), for the audit's counter. */
    long barBytes;
    /**
     * Scratch of {@link DmaTranslation#translate}: the aperture BAR whose last resolution returned
     * memory {@code coverSeg} spanning BAR offsets [coverFrom, coverTo) (null when none), so the
     * following BAR pages it covers take their bytes from it without asking the device again.
     */
    BarResource covered;
    long coverFrom;
    long coverTo;
    MemorySegment coverSeg;

    /** This thread's pair. */
    static DmaRuns[] mine() {
        return MINE.get();
    }

    void reset() {
        count = 0;
        barBytes = 0;
        covered = null;
        coverSeg = null;
    }

    /**
     * Appends {@code bytes} at {@code offset} of {@code s}: extends the last run when they follow
     * it in the same segment, else starts a run.
     */
    void add(MemorySegment s, long offset, long bytes, boolean bar) {
        int k = count - 1;
        if (k >= 0 && seg[k] == s && off[k] + len[k] == offset) {
            len[k] += bytes;
        } else {
            if (count == seg.length) {
                grow();
            }
            seg[count] = s;
            off[count] = offset;
            len[count] = bytes;
            count++;
        }
        if (bar) {
            barBytes += bytes;
        }
    }

    private void grow() {
        int n = seg.length << 1;
        seg = Arrays.copyOf(seg, n);
        off = Arrays.copyOf(off, n);
        len = Arrays.copyOf(len, n);
    }
}
