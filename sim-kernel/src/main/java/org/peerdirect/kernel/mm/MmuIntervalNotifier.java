package org.peerdirect.kernel.mm;

/**
 * {@code struct mmu_interval_notifier}: a subscription to invalidations of [start, end) of one
 * address space, with the sequence protocol of {@code mm/mmu_notifier.c}:
 * <pre>
 *   again:
 *     seq = n.readBegin();          // waits while an invalidation of this interval runs
 *     ... hmm_range_fault / look up pages, no driver lock held ...
 *     lock(driverLock);
 *     if (n.readRetry(seq)) { unlock; goto again; }
 *     ... program the device ...
 *     unlock(driverLock);
 * </pre>
 * and in the invalidate callback: {@code lock(driverLock); n.setSeq(curSeq); stop device access;
 * unlock}.
 */
public final class MmuIntervalNotifier {

    private final AddressSpace mm;
    private final long start;
    private final long end;
    private final MmuIntervalNotifierOps ops;
    /** The sequence of the last invalidation that touched this interval; written by setSeq. */
    volatile long invalidateSeq;
    volatile boolean removed;
    /** Its place among the subscriptions' notifiers. */
    final MmuNotifierSubscriptions.Key key;

    MmuIntervalNotifier(AddressSpace mm, long start, long end, MmuIntervalNotifierOps ops, long seq, MmuNotifierSubscriptions.Key key) {
        this.mm = mm;
        this.key = key;
        this.start = start;
        this.end = end;
        this.ops = ops;
        this.invalidateSeq = seq;
    }

    public AddressSpace mm() {
        return mm;
    }

    public long start() {
        return start;
    }

    public long end() {
        return end;
    }

    MmuIntervalNotifierOps ops() {
        return ops;
    }

    /** {@code mmu_interval_read_begin}: waits for a running invalidation of this interval to end. */
    public long readBegin() {
        return mm.notifiers().readBegin(this);
    }

    /** {@code mmu_interval_read_retry}: true when an invalidation hit this interval since readBegin. */
    public boolean readRetry(long seq) {
        return invalidateSeq != seq;
    }

    /** {@code mmu_interval_check_retry}: the same test, for use without the driver lock (advisory). */
    public boolean checkRetry(long seq) {
        return readRetry(seq);
    }

    /** {@code mmu_interval_set_seq}: called from the invalidate callback, under the driver lock. */
    public void setSeq(long curSeq) {
        invalidateSeq = curSeq;
    }

    /** {@code mmu_interval_notifier_remove}: waits for a running callback of this notifier to finish. */
    public void remove() {
        mm.notifiers().remove(this);
    }

    public boolean removed() {
        return removed;
    }

    @Override
    public String toString() {
        return String.format("notifier[0x%x-0x%x]", start, end);
    }
}
