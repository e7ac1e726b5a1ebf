package org.peerdirect.hca.engine;

import org.peerdirect.kernel.dma.DmaPort;
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
            // indirect (KSM) entries first: locked in serial order and resolved under their locks to
            // the entry and address that translate the chunk; then those (and the direct entries) in
            // serial order. A thread never takes an indirect entry's lock holding a direct one's, so
            // the two levels cannot form a cycle with a waiting writer (a UMR holds one lock).
            Mpt si = sm != null && sm.indirect ? sm : null;
            Mpt di = dm.indirect ? dm : null;
            Mpt i1 = si == null ? di : di == null || si.serial < di.serial ? si : di;
            Mpt i2 = i1 == si ? di : si;
            if (i2 == i1) {
                i2 = null;
            }
            long is1 = i1 == null ? 0 : i1.lock.readLock();
            long is2 = i2 == null ? 0 : i2.lock.readLock();
            try {
                Mpt st = sm;
                long stva = sva;
                Mpt dt = dm;
                long dtva = dva;
                if (si != null) {
                    Outcome o = resolve(src, si, sva, n, srcErr, false);
                    if (o != null) {
                        return o;
                    }
                    st = src.tgt;
                    stva = src.tgtVa;
                    n = src.chunk;
                }
                if (di != null) {
                    Outcome o = resolve(dst, di, dva, n, dstErr, true);
                    if (o != null) {
                        return o;
                    }
                    dt = dst.tgt;
                    dtva = dst.tgtVa;
                    n = dst.chunk;
                }
                Outcome o = chunk(src, dst, sm, sva, st, stva, dm, dva, dt, dtva, n, srcErr, dstErr);
                if (o != null) {
                    return o;
                }
                n = src.chunk;
            } finally {
                if (i2 != null) {
                    i2.lock.unlockRead(is2);
                }
                if (i1 != null) {
                    i1.lock.unlockRead(is1);
                }
            }
            src.advance(n);
            dst.advance(n);
            len -= n;
        }
        return null;
    }

    /**
     * Resolves the block of indirect entry {@code ind} (the side's piece, its read lock held) at
     * {@code va}: null with the target and the address in it in {@code side.tgt}/{@code side.tgtVa}
     * and the chunk bounded to the block (and to a block-translated target's contiguity) in
     * {@code side.chunk}; {@code err} when the entry changed since admission, the block lies beyond
     * its entries or its target is not a valid direct entry of the same PD; a page fault on the
     * indirect key when the block has no target.
     */
    static Outcome resolve(Segs side, Mpt ind, long va, long n, Outcome err, boolean write) {
        if (ind.state != Mpt.State.VALID || ind.gen != side.gen[side.cur]) {
            return err;
        }
        long k = ind.target(va);
        if (k == 0) {
            return side.fault(ind, va, write);
        }
        Mpt t = k < 0 ? null : side.dev.mpt((int) k);
        if (t == null || t.indirect || t.pdn != ind.pdn) {
            return err;
        }
        side.tgt = t;
        side.tgtVa = ind.targetVa(va);
        n = Math.min(n, ind.blockLeft(va));
        side.chunk = t.onDemand() ? n : Math.min(n, t.contiguous(side.tgtVa));
        return null;
    }

    /**
     * One chunk of at most {@code n} bytes under the read locks of the translating entries
     * {@code st} and {@code dt} (the pieces' own entries {@code sm}/{@code dm}, or an indirect
     * one's target); the bytes moved are left in {@code src.chunk}. A piece's own entry is checked
     * against the generation it was admitted at; a target only for being valid and covering the
     * chunk (its rights are the indirect entry's). Misses are reported on the piece's own key and
     * address, as the device reports them (what the work request named).
     */
    private static Outcome chunk(Segs src, Segs dst, Mpt sm, long sva, Mpt st, long stva, Mpt dm, long dva, Mpt dt, long dtva, long n,
            Outcome srcErr, Outcome dstErr) {
        Mpt first = st == null || dt.serial < st.serial ? dt : st;
        Mpt second = first == dt ? st : dt;
        if (second == first) {
            second = null;
        }
        long s1 = first.lock.readLock();
        long s2 = second == null ? 0 : second.lock.readLock();
        try {
            // a UMR since the rights were checked (another generation) changed what they were checked against
            if (st != null && (st.state != Mpt.State.VALID || (st == sm ? st.gen != src.gen[src.cur] : !st.contains(stva, n)))) {
                return srcErr;
            }
            if (dt.state != Mpt.State.VALID || (dt == dm ? dt.gen != dst.gen[dst.cur] : !dt.contains(dtva, n))) {
                return dstErr;
            }
            if (st != null && !st.mapped(stva, Mpt.MTT_READ)) {
                return src.fault(sm, sva, false);
            }
            if (!dt.mapped(dtva, Mpt.MTT_WRITE)) {
                return dst.fault(dm, dva, true);
            }
            if (st != null && st.onDemand()) {
                n = Math.min(n, st.mappedRun(stva, n, Mpt.MTT_READ));
            }
            if (dt.onDemand()) {
                n = Math.min(n, dt.mappedRun(dtva, n, Mpt.MTT_WRITE));
            }
            DmaPort dp = dt.port(dst.dev.domain);
            if (st == null) {
                dp.write(dt.iova(dtva), src.inline, src.inlineOff + src.done, n);
            } else if (st.space == null && dt.space == null) {
                src.dev.domain.copyTo(st.iova(stva), dst.dev.domain, dt.iova(dtva), n);
            } else {
                Outcome o = acrossSpaces(st.port(src.dev.domain), st.iova(stva), dp, dt.iova(dtva), n, srcErr, dstErr);
                if (o != null) {
                    return o;
                }
            }
            src.chunk = n;
            return null;
        } catch (IommuFault f) {
            boolean srcSide = src.dev.domain != dst.dev.domain ? f.domain().equals(src.dev.domain.name())
                    : st != null && f.iova() >= st.iova(stva) && f.iova() < st.iova(stva) + n;
            return srcSide ? srcErr : dstErr;
        } finally {
            if (second != null) {
                second.lock.unlockRead(s2);
            }
            first.lock.unlockRead(s1);
        }
    }

    /**
     * One chunk between two memory spaces (host memory behind the IOMMU and the DPA's on-card
     * memory, which the NIC reaches directly): the NIC's DMA engine reads into its buffer, then
     * writes; a refused read moves nothing, a refused write leaves the source as it was.
     */
    private static Outcome acrossSpaces(DmaPort sp, long siova, DmaPort dp, long diova, long n, Outcome srcErr, Outcome dstErr) {
        java.lang.foreign.MemorySegment buf = java.lang.foreign.MemorySegment.ofArray(new byte[(int) n]);
        try {
            sp.read(siova, buf, 0, n);
        } catch (IommuFault f) {
            return srcErr;
        }
        try {
            dp.write(diova, buf, 0, n);
        } catch (IommuFault f) {
            return dstErr;
        }
        return null;
    }

    /**
     * Gathers {@code len} bytes from the cursor {@code src} into {@code to} at {@code toOff}: what a
     * NIC's DMA engine does to fill a packet ({@code rxe}'s {@code copy_data} in the
     * {@code RXE_FROM_MR_OBJ} direction). Each chunk under the read lock of the entry that
     * translates it (an indirect entry's first, as in {@link #move}). Null, {@code srcErr} (a key
     * revoked or changed since admission, a DMA fault), or {@link Outcome#PAGE_FAULT} with the
     * miss recorded on {@code src}.
     */
    static Outcome gather(Segs src, java.lang.foreign.MemorySegment to, long toOff, long len, Outcome srcErr) {
        while (len > 0) {
            long a = src.left();
            if (a == 0) {
                return srcErr;
            }
            long n = Math.min(len, a);
            if (src.inline != null) {
                java.lang.foreign.MemorySegment.copy(src.inline, src.inlineOff + src.done, to, toOff, n);
            } else {
                Mpt m = src.mpt[src.cur];
                long va = src.va[src.cur] + src.done;
                Mpt ind = m.indirect ? m : null;
                long is = ind == null ? 0 : ind.lock.readLock();
                try {
                    Mpt t = m;
                    long tva = va;
                    if (ind != null) {
                        Outcome o = resolve(src, ind, va, n, srcErr, false);
                        if (o != null) {
                            return o;
                        }
                        t = src.tgt;
                        tva = src.tgtVa;
                        n = src.chunk;
                    }
                    long s = t.lock.readLock();
                    try {
                        if (t.state != Mpt.State.VALID || (t == m ? t.gen != src.gen[src.cur] : !t.contains(tva, n))) {
                            return srcErr;
                        }
                        if (!t.mapped(tva, Mpt.MTT_READ)) {
                            return src.fault(m, va, false);
                        }
                        n = Math.min(n, t.onDemand() ? t.mappedRun(tva, n, Mpt.MTT_READ) : t.contiguous(tva));
                        t.port(src.dev.domain).read(t.iova(tva), to, toOff, n);
                    } finally {
                        t.lock.unlockRead(s);
                    }
                } catch (IommuFault f) {
                    return srcErr;
                } finally {
                    if (ind != null) {
                        ind.lock.unlockRead(is);
                    }
                }
            }
            src.advance(n);
            toOff += n;
            len -= n;
        }
        return null;
    }
}
