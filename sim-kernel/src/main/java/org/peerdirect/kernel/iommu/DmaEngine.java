package org.peerdirect.kernel.iommu;

import static org.peerdirect.kernel.iommu.DmaTranslation.SLOT_APERTURE;
import static org.peerdirect.kernel.iommu.DmaTranslation.SLOT_RESOURCE;
import static org.peerdirect.kernel.iommu.DmaTranslation.address;
import static org.peerdirect.kernel.iommu.DmaTranslation.pages;
import static org.peerdirect.kernel.iommu.IoPageTable.DEV_READ;
import static org.peerdirect.kernel.iommu.IoPageTable.DEV_WRITE;
import static org.peerdirect.kernel.iommu.IoPageTable.RESOURCE;
import static org.peerdirect.kernel.iommu.IoPageTable.VALID;
import static org.peerdirect.kernel.iommu.IommuDomain.IOVA_BASE;
import static org.peerdirect.kernel.iommu.IommuDomain.IOVA_PAGES;
import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.StampedLock;
import java.util.function.IntConsumer;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;
import org.peerdirect.kernel.pci.BarAperture;

/**
 * The device's side of one domain ({@link org.peerdirect.kernel.dma.DmaPort}): reads, writes,
 * peer-to-peer copies, atomics, descriptor writes and flushing reads, each through the page walk
 * ({@link DmaTranslation}) and recorded in the {@link DomainAudit}.
 *
 * <p>Translate once, then copy: a transfer is translated in one pass into this thread's
 * {@link DmaRuns} (segment, offset, length; pages whose memory follows on merged), every page
 * checked before the first byte moves (all or nothing), and then copied run by run without
 * looking at the table again.
 *
 * <p>The invariant the system proves: once an unmap returns, no DMA through that mapping is in
 * flight or will ever happen. A transfer takes the domain's read lock before it translates and
 * releases it after its last byte has moved through the runs (a peer copy holds both domains'
 * read locks, taken in creation order); map and unmap hold the write lock, so an unmap that
 * races a transfer either completes before the translation (which then faults) or waits until
 * the copy is done. The runs are therefore never used after the unmap of a mapping they name
 * returned, and never outlive the lock hold they were made under (each transfer resets them).
 * The one exception to holding the lock, {@link #readOptimistic}, lets no byte it read take
 * effect unless an optimistic stamp validates afterwards, which proves no map or unmap ran
 * during the read.
 */
final class DmaEngine {

    private static final VarHandle LONG_AT = ValueLayout.JAVA_LONG.varHandle();
    /** The largest read {@link #readOptimistic} serves: a send WQE basic block or a CQE. */
    private static final int BOUNCE_SIZE = 64;
    private static final ThreadLocal<MemorySegment> BOUNCE = ThreadLocal.withInitial(() -> MemorySegment.ofArray(new long[BOUNCE_SIZE / 8]));
    /** Bytes below which {@link #writeDescriptor} moves word by word. */
    private static final int SMALL_DESCRIPTOR = 128;

    private final IommuDomain domain;
    private final StampedLock lock;
    private final IoPageTable table;
    private final DmaTranslation walk;
    private final DomainAudit audit;
    private final PhysicalMemory phys;
    private final MemorySegment memory;
    /**
     * A test's probe, run under the read lock(s) after the translation and before copy number
     * {@code k} of a transfer: the interleaving tests start an unmap there and check it cannot
     * return before the transfer has moved its last byte. Null outside those tests (one read of
     * a plain field per copy); set and cleared by the thread that then runs the transfers.
     */
    IntConsumer probe;

    DmaEngine(IommuDomain domain, StampedLock lock, IoPageTable table, DomainAudit audit, PhysicalMemory phys) {
        this.domain = domain;
        this.lock = lock;
        this.table = table;
        this.audit = audit;
        this.phys = phys;
        this.memory = phys.memory();
        this.walk = new DmaTranslation(table, audit, phys, lock);
    }

    /**
     * Device reads {@code len} bytes at iova into {@code dst}. All pages are checked before any
     * byte moves, so a faulting DMA moves nothing.
     */
    void read(long iova, MemorySegment dst, long dstOffset, long len) {
        if (len <= BOUNCE_SIZE && len > 0 && dstOffset >= 0 && dstOffset + len <= dst.byteSize() && readOptimistic(iova, dst, dstOffset, (int) len)) {
            audit.bytesRead.add(len);
            return;
        }
        transfer(iova, dst, dstOffset, len, false);
        audit.bytesRead.add(len);
    }

    /**
     * A small device read (a doorbell record, a WQE basic block) without taking the read lock:
     * the common case only, every page a frame mapped with the read right and no mapped frame
     * ever freed; anything else returns false and the caller takes the locked way, which also
     * names the fault. The bytes are copied into a per-thread bounce buffer under an optimistic
     * stamp and reach {@code dst} only once the stamp validates, i.e. once no map or unmap ran
     * during the copy: the read then happened entirely while the translation held, as if under
     * the lock, and a read that overlapped an unmap leaves {@code dst} untouched (all or nothing,
     * as {@link #transfer}). Physical memory is one segment that outlives every frame, so a
     * stale translation read meanwhile copies someone's bytes into the bounce buffer, never past
     * it, and they are discarded. Why: a doorbell's fetch is two such reads, and their lock's
     * two CASes per read were a tenth of a small RDMA WRITE's cost.
     */
    private boolean readOptimistic(long iova, MemorySegment dst, long dstOffset, int len) {
        long stamp = lock.tryOptimisticRead();
        if (stamp == 0 || phys.freedWhileDmaMapped() != 0) {
            return false;
        }
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        long q = (iova + len - 1 - IOVA_BASE) >> PAGE_SHIFT;
        if (p < 0 || q >= IOVA_PAGES) {
            return false;
        }
        long want = VALID | DEV_READ;
        long mask = want | RESOURCE;
        long e = table.entry(p);
        long e2 = q == p ? e : table.entry(q);
        if ((e & mask) != want || (e2 & mask) != want) {
            return false;
        }
        MemorySegment bounce = BOUNCE.get();
        long in = iova & (PAGE_SIZE - 1);
        int first = (int) Math.min(len, PAGE_SIZE - in);
        try {
            MemorySegment.copy(memory, (e & -PAGE_SIZE) | in, bounce, 0, first);
            if (first < len) {
                MemorySegment.copy(memory, e2 & -PAGE_SIZE, bounce, first, len - first);
            }
        } catch (IndexOutOfBoundsException staleEntry) {
            return false; // an entry read while it changed: the stamp would not validate either
        }
        if (!lock.validate(stamp)) {
            return false;
        }
        MemorySegment.copy(bounce, 0, dst, dstOffset, len);
        return true;
    }

    /** Device writes {@code len} bytes from {@code src} at iova; all or nothing. */
    void write(long iova, MemorySegment src, long srcOffset, long len) {
        transfer(iova, src, srcOffset, len, true);
        audit.bytesWritten.add(len);
    }

    /**
     * A read ({@code toMemory} false) or write of {@code len} bytes at {@code iova}: translated
     * once into this thread's runs, then copied run by run, all under the read lock (see the
     * class comment: the copy is ordered before any unmap that raced it).
     */
    private void transfer(long iova, MemorySegment buf, long off, long len, boolean toMemory) {
        if (len < 0 || off < 0 || off + len > buf.byteSize()) {
            throw new KernelException(Errno.EINVAL, "device buffer range " + off + "+" + len + " outside " + buf.byteSize() + " bytes");
        }
        if (len == 0) {
            return;
        }
        DmaRuns runs = DmaRuns.mine()[0];
        long stamp = lock.readLock();
        try {
            walk.translate(iova, len, toMemory ? DEV_WRITE : DEV_READ, runs);
            long done = off;
            for (int k = 0; k < runs.count; k++) {
                probe(k);
                long n = runs.len[k];
                if (toMemory) {
                    MemorySegment.copy(buf, done, runs.seg[k], runs.off[k], n);
                } else {
                    MemorySegment.copy(runs.seg[k], runs.off[k], buf, done, n);
                }
                done += n;
            }
            if (runs.barBytes != 0) {
                audit.barBytes.add(runs.barBytes); // once per transfer: the counter is shared by every DMA of the domain
            }
        } catch (IllegalStateException barFreed) {
            throw audit.barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /**
     * Peer-to-peer DMA: {@code len} bytes from {@code srcIova} of this domain to {@code dstIova} of
     * {@code d} (the requester's read and the responder's write of one RDMA transfer between two
     * devices). All or nothing. Both domains' read locks are taken in creation order, so two
     * transfers in opposite directions cannot deadlock against a waiting unmap.
     */
    void copyTo(long srcIova, IommuDomain d, long dstIova, long len) {
        if (len < 0) {
            throw new KernelException(Errno.EINVAL, "negative DMA copy length " + len);
        }
        if (len == 0) {
            return;
        }
        IommuDomain first = domain.order <= d.order ? domain : d;
        IommuDomain second = first == domain ? d : domain;
        long s1 = first.lock.readLock();
        try {
            long s2 = second == first ? 0 : second.lock.readLock();
            try {
                copyLocked(srcIova, d.engine, dstIova, len);
            } catch (IllegalStateException barFreed) {
                throw audit.barGone(srcIova);
            } finally {
                if (second != first) {
                    second.lock.unlockRead(s2);
                }
            }
        } finally {
            first.lock.unlockRead(s1);
        }
    }

    /**
     * {@link #copyTo} with both domains' read locks held: both ranges translated once (the source
     * first: a fault names the source page when both would fault, as before), then the two run
     * lists walked side by side, one copy per stretch where both stay contiguous.
     */
    private void copyLocked(long srcIova, DmaEngine d, long dstIova, long len) {
        DmaRuns[] mine = DmaRuns.mine();
        DmaRuns a = mine[0];
        DmaRuns b = mine[1];
        walk.translate(srcIova, len, DEV_READ, a);
        d.walk.translate(dstIova, len, DEV_WRITE, b);
        int i = 0;
        int j = 0;
        long ai = 0; // bytes of run a[i] done
        long bj = 0;
        for (int k = 0; i < a.count; k++) {
            probe(k);
            long n = Math.min(a.len[i] - ai, b.len[j] - bj);
            MemorySegment.copy(a.seg[i], a.off[i] + ai, b.seg[j], b.off[j] + bj, n);
            ai += n;
            bj += n;
            if (ai == a.len[i]) {
                i++;
                ai = 0;
            }
            if (bj == b.len[j]) {
                j++;
                bj = 0;
            }
        }
        if (a.barBytes != 0) {
            audit.barBytes.add(a.barBytes);
        }
        if (b.barBytes != 0) {
            d.audit.barBytes.add(b.barBytes);
        }
        audit.bytesRead.add(len);
        d.audit.bytesWritten.add(len);
    }

    private void probe(int k) {
        IntConsumer p = probe;
        if (p != null) {
            p.accept(k);
        }
    }

    /** 8-byte atomic fetch-and-add at an 8-byte aligned IOVA (IB atomics). */
    long fetchAdd(long iova, long delta) {
        checkAtomic(iova);
        long stamp = lock.readLock();
        try {
            long slot = walk.translatePage(iova, DEV_READ | DEV_WRITE);
            return (long) LONG_AT.getAndAdd(walk.segment(slot, iova), address(slot, iova), delta);
        } catch (IllegalStateException barFreed) {
            throw audit.barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** 8-byte atomic compare-and-swap; returns the value found. */
    long compareAndSwap(long iova, long expect, long update) {
        checkAtomic(iova);
        long stamp = lock.readLock();
        try {
            long slot = walk.translatePage(iova, DEV_READ | DEV_WRITE);
            return (long) LONG_AT.compareAndExchange(walk.segment(slot, iova), address(slot, iova), expect, update);
        } catch (IllegalStateException barFreed) {
            throw audit.barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** 8-byte store with release order at an 8-byte aligned IOVA (ATOMIC WRITE): the write right suffices. */
    void atomicWrite(long iova, long value) {
        checkAtomic(iova);
        long stamp = lock.readLock();
        try {
            long slot = walk.translatePage(iova, DEV_WRITE);
            LONG_AT.setRelease(walk.segment(slot, iova), address(slot, iova), value);
        } catch (IllegalStateException barFreed) {
            throw audit.barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    private static void checkAtomic(long iova) {
        if ((iova & 7) != 0) {
            throw new KernelException(Errno.EINVAL, String.format("atomic at iova 0x%x is not 8-byte aligned", iova));
        }
    }

    /**
     * Copies all but the last word under the read lock and one translation, then stores the last
     * word with release semantics: a poller that acquires the owner bit sees every earlier byte.
     * A descriptor never crosses a page (CQEs and EQEs are 64-byte aligned in their rings), so
     * one page is translated; all or nothing as {@link #transfer}.
     */
    void writeDescriptor(long iova, MemorySegment src, long srcOffset, int len) {
        if ((iova & 7) != 0 || (len & 7) != 0 || len < 8 || (iova & (PAGE_SIZE - 1)) + len > PAGE_SIZE) {
            throw new KernelException(Errno.EINVAL, String.format("descriptor write of %d bytes at iova 0x%x: needs 8-byte alignment, "
                    + "whole words and one page", len, iova));
        }
        if (srcOffset < 0 || srcOffset + len > src.byteSize()) {
            throw new KernelException(Errno.EINVAL, "device buffer range " + srcOffset + "+" + len + " outside " + src.byteSize() + " bytes");
        }
        long stamp = lock.readLock();
        try {
            long slot = walk.translatePage(iova, DEV_WRITE);
            MemorySegment seg = walk.segment(slot, iova);
            long at = address(slot, iova);
            int body = len - 8;
            if (body <= SMALL_DESCRIPTOR) {
                // word by word: a bulk copy's set-up cost more than the copy for a CQE's 56 bytes
                for (int i = 0; i < body; i += 8) {
                    seg.set(ValueLayout.JAVA_LONG_UNALIGNED, at + i, src.get(ValueLayout.JAVA_LONG_UNALIGNED, srcOffset + i));
                }
            } else {
                MemorySegment.copy(src, srcOffset, seg, at, body);
            }
            LONG_AT.setRelease(seg, at + body, src.get(ValueLayout.JAVA_LONG_UNALIGNED, srcOffset + body));
            if ((slot & SLOT_RESOURCE) != 0) {
                audit.barBytes.add(len);
            }
        } catch (IllegalStateException barFreed) {
            throw audit.barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
        audit.bytesWritten.add(len);
    }

    /**
     * The flushing read of an RDMA FLUSH: each page translated with the read right (a fault names
     * the first page refused), each run of consecutive pages of one aperture BAR handed to its
     * device as one flush, then a full fence (this port's earlier stores are visible). Runs are
     * flushed as the walk finds them: flushing more than the range is harmless, so a fault after
     * a run was flushed loses nothing. Holds the read lock throughout, as a transfer does: an
     * unmap waits for it.
     */
    void flush(long iova, long len) {
        if (len < 0) {
            throw new KernelException(Errno.EINVAL, "negative flush length " + len);
        }
        if (len > 0) {
            long stamp = lock.readLock();
            try {
                flushLocked(iova, len);
            } finally {
                lock.unlockRead(stamp);
            }
        }
        VarHandle.fullFence();
    }

    private void flushLocked(long iova, long len) {
        int n = pages(iova, len);
        long base = iova & -PAGE_SIZE;
        BarResource run = null;
        long runIova = 0;
        long runFrom = 0;
        long runTo = 0;
        for (int i = 0; i < n; i++) {
            long va = base + ((long) i << PAGE_SHIFT);
            long slot = walk.translatePage(va, DEV_READ);
            BarResource r = (slot & SLOT_APERTURE) == 0 ? null : table.resource((va - IOVA_BASE) >> PAGE_SHIFT);
            long off = slot & -PAGE_SIZE;
            if (run != null && (r != run || off != runTo)) {
                run.flush(domain.name(), runFrom, runTo, runIova);
                run = null;
            }
            if (r != null) {
                if (run == null) {
                    run = r;
                    runIova = va;
                    runFrom = off;
                }
                runTo = off + PAGE_SIZE;
            }
        }
        if (run != null) {
            run.flush(domain.name(), runFrom, runTo, runIova);
        }
    }

    /** Every page mapped, and a page of a persistent aperture BAR. */
    boolean persistent(long iova, long len) {
        if (len <= 0) {
            return false;
        }
        long stamp = lock.readLock();
        try {
            long first = ((iova & -PAGE_SIZE) - IOVA_BASE) >> PAGE_SHIFT;
            int n = pages(iova, len);
            if (first < 0 || first + n > IOVA_PAGES) {
                return false;
            }
            for (int i = 0; i < n; i++) {
                long p = first + i;
                long e = table.entry(p);
                if ((e & (VALID | RESOURCE)) != (VALID | RESOURCE)) {
                    return false;
                }
                BarAperture a = table.resource(p).aperture();
                if (a == null || !a.persistent()) {
                    return false;
                }
            }
            return true;
        } finally {
            lock.unlockRead(stamp);
        }
    }
}
