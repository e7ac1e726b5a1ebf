package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;

/**
 * A cursor over one side of a transfer: up to {@code n} pieces, each either a range of an MPT
 * (translated to IOVAs of {@link #dev}'s domain) or bytes of an inline buffer. Preallocated per
 * QP and reused: the data path allocates nothing.
 */
final class Segs {
    HcaDevice dev;
    final Mpt[] mpt;
    final long[] va;
    final long[] len;
    /** The entry's generation each piece was admitted at ({@link Mpt#admit}). */
    final int[] gen;
    MemorySegment inline;
    long inlineOff;
    int n;
    int cur;
    long done;
    /** Set by {@link DmaMover} when this side hit a translation miss: the entry, the address, whether it wrote. */
    Mpt faultMpt;
    /** Bytes the last chunk of {@link DmaMover} moved (or, after {@link DmaMover#resolve}, may move). */
    long chunk;
    /** After {@link DmaMover#resolve}: the indirect piece's target entry and the address in it. */
    Mpt tgt;
    long tgtVa;
    long faultVa;
    boolean faultWrite;

    Segs(int max) {
        mpt = new Mpt[max + 1];
        va = new long[max + 1];
        len = new long[max + 1];
        gen = new int[max + 1];
    }

    Segs reset(HcaDevice dev) {
        this.dev = dev;
        this.inline = null;
        n = 0;
        cur = 0;
        done = 0;
        faultMpt = null;
        return this;
    }

    /** Adds a piece of entry {@code m} admitted at generation {@code g}. */
    void add(Mpt m, long v, long l, int g) {
        if (l == 0) {
            return;
        }
        gen[n] = g;
        mpt[n] = m;
        va[n] = v;
        len[n] = l;
        n++;
    }

    Segs inline(MemorySegment seg, long off, long l) {
        inline = seg;
        inlineOff = off;
        mpt[0] = null;
        va[0] = 0;
        len[0] = l;
        n = l == 0 ? 0 : 1;
        return this;
    }

    long total() {
        long t = 0;
        for (int i = 0; i < n; i++) {
            t += len[i];
        }
        return t;
    }

    /** Bytes left in the current piece, skipping finished pieces. */
    long left() {
        while (cur < n && done == len[cur]) {
            cur++;
            done = 0;
        }
        return cur < n ? len[cur] - done : 0;
    }

    void advance(long k) {
        done += k;
    }

    /** Steps over {@code k} bytes, across pieces, moving nothing (the caller checked {@link #total}). */
    void skip(long k) {
        while (k > 0) {
            long l = left();
            if (l == 0) {
                return;
            }
            long s = Math.min(l, k);
            advance(s);
            k -= s;
        }
    }

    /** Records a translation miss of this side; the outcome {@link Outcome#PAGE_FAULT}. */
    Outcome fault(Mpt m, long va, boolean write) {
        faultMpt = m;
        faultVa = va;
        faultWrite = write;
        return Outcome.PAGE_FAULT;
    }

    /**
     * The page-fault event for this side's miss: its key, the missing address, the bytes of the
     * piece from there, and {@link PageFault#FLAG_WRITE} when the access wrote.
     */
    PageFault faultEvent(int token, int subtype, int flags, int wqNum, long wqeIndex) {
        return new PageFault(token, subtype, flags | (faultWrite ? PageFault.FLAG_WRITE : 0), wqNum, wqeIndex, faultMpt.key, faultVa,
                va[cur] + len[cur] - faultVa);
    }
}
