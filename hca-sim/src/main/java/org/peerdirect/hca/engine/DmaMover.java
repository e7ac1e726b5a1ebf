package org.peerdirect.hca.engine;

import org.peerdirect.kernel.iommu.IommuFault;

/**
 * Moves bytes between two cursors through the devices' IOMMU domains ({@code rxe}'s
 * {@code copy_data}): chunk by chunk within IOVA-contiguous MTT blocks, each chunk under the read
 * locks of both MPT entries (taken in serial order, so two transfers never deadlock), so a revoke
 * that returned has no chunk in flight.
 */
final class DmaMover {

    private DmaMover() {
    }

    /**
     * Moves {@code len} bytes; null, or the outcome of the side whose key was revoked or whose DMA
     * faulted, or {@link Outcome#PAGE_FAULT} when a page of an on-demand entry lacks the right
     * (read on the source, write on the destination): the side records where ({@link Segs#fault}).
     */
    static Outcome move(Segs src, Segs dst, long len, Outcome srcErr, Outcome dstErr) {
        while (len > 0) {
            long a = src.left();
            long b = dst.left();
            if (a == 0 || b == 0) {
                return b == 0 ? dstErr : srcErr;
            }
            Mpt sm = src.inline != null ? null : src.mpt[src.cur];
            Mpt dm = dst.mpt[dst.cur];
            long sva = src.va[src.cur] + src.done;
            long dva = dst.va[dst.cur] + dst.done;
            long n = Math.min(len, Math.min(a, b));
            // a block-translated entry bounds the run now; a page-translated one (UMR, ODP) under
            // its read lock below, where its entries cannot change
            if (sm != null && !sm.onDemand()) {
                n = Math.min(n, sm.contiguous(sva));
            }
            if (!dm.onDemand()) {
                n = Math.min(n, dm.contiguous(dva));
            }
            Mpt first = sm == null || dm.serial < sm.serial ? dm : sm;
            Mpt second = first == dm ? sm : dm;
            if (second == first) {
                second = null;
            }
            long s1 = first.lock.readLock();
            long s2 = second == null ? 0 : second.lock.readLock();
            try {
                // a UMR since the rights were checked (another generation) changed what they were checked against
                if (sm != null && (sm.state != Mpt.State.VALID || sm.gen != src.gen[src.cur])) {
                    return srcErr;
                }
                if (dm.state != Mpt.State.VALID || dm.gen != dst.gen[dst.cur]) {
                    return dstErr;
                }
                if (sm != null && !sm.mapped(sva, Mpt.MTT_READ)) {
                    return src.fault(sm, sva, false);
                }
                if (!dm.mapped(dva, Mpt.MTT_WRITE)) {
                    return dst.fault(dm, dva, true);
                }
                if (sm != null && sm.onDemand()) {
                    n = Math.min(n, sm.mappedRun(sva, n, Mpt.MTT_READ));
                }
                if (dm.onDemand()) {
                    n = Math.min(n, dm.mappedRun(dva, n, Mpt.MTT_WRITE));
                }
                if (sm == null) {
                    dst.dev.domain.write(dm.iova(dva), src.inline, src.inlineOff + src.done, n);
                } else {
                    src.dev.domain.copyTo(sm.iova(sva), dst.dev.domain, dm.iova(dva), n);
                }
            } catch (IommuFault f) {
                boolean srcSide = src.dev.domain != dst.dev.domain ? f.domain().equals(src.dev.domain.name())
                        : sm != null && f.iova() >= sm.iova(sva) && f.iova() < sm.iova(sva) + n;
                return srcSide ? srcErr : dstErr;
            } finally {
                if (second != null) {
                    second.lock.unlockRead(s2);
                }
                first.lock.unlockRead(s1);
            }
            src.advance(n);
            dst.advance(n);
            len -= n;
        }
        return null;
    }
}
