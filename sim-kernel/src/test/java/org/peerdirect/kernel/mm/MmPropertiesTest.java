package org.peerdirect.kernel.mm;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Random sequences of mmap / munmap / touch / pageout / dontneed / migrate / mprotect / pin /
 * unpin against a simple reference model (page → expected value), checked after every step: data
 * as the model says, no frame leaked or owned twice, every change of a watched range seen by its
 * notifier before it happened, notifier sequence numbers increasing.
 */
class MmPropertiesTest {

    static final int PAGES = 32;
    static final long BASE = 0x40000000L;

    enum Kind { WRITE, READ, MUNMAP, MMAP, PAGEOUT, DONTNEED, MIGRATE, RDONLY, RDWR, PIN, UNPIN, RECLAIM }

    record Op(Kind kind, int page, int npages, long value) {
    }

    @Provide
    Arbitrary<List<Op>> ops() {
        Arbitrary<Op> op = Combinators.combine(Arbitraries.of(Kind.class), Arbitraries.integers().between(0, PAGES - 1),
                Arbitraries.integers().between(1, 6), Arbitraries.longs()).as(Op::new);
        return op.list().ofMinSize(1).ofMaxSize(60);
    }

    @Property
    void theKernelAgreesWithTheModel(@ForAll("ops") List<Op> ops) throws Exception {
        Path dir = Files.createTempDirectory("mmprop");
        // 2 MiB of RAM for 32 pages of user memory plus pins: pressure and reclaim happen
        Mm mm = new Mm(256 * PAGE_SIZE, true, dir.resolve("swap"), 4L << 20);
        try {
            run(mm, ops);
        } finally {
            mm.close();
            Files.deleteIfExists(dir.resolve("swap"));
            Files.deleteIfExists(dir);
        }
        if (PhysicalMemory.of(mm).freeFrames() != PhysicalMemory.of(mm).nrFrames()) {
            throw new AssertionError("frames leaked after close: " + (PhysicalMemory.of(mm).nrFrames() - PhysicalMemory.of(mm).freeFrames()));
        }
    }

    private static void run(Mm mm, List<Op> ops) {
        AddressSpace p = mm.createProcess("prop");
        p.setMemlockLimit(1L << 30);
        p.mmap(BASE, PAGES * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.ANON, "prop");
        Map<Integer, Long> model = new HashMap<>(); // mapped pages → expected value (absent key: unmapped)
        boolean[] writable = new boolean[PAGES];
        for (int i = 0; i < PAGES; i++) {
            model.put(i, 0L);
            writable[i] = true;
        }
        List<PinnedPages> pins = new ArrayList<>();
        // watches pages [8, 16): every callback must come while the frames it covers are still allocated
        int watchFrom = 8;
        int watchTo = 16;
        long[] lastSeq = {Long.MIN_VALUE};
        List<String> problems = new ArrayList<>();
        Map<Long, Long> watchedFrames = new HashMap<>(); // va → frame before the operation
        int[] calls = {0};
        MmuIntervalNotifier n = p.insertNotifier(BASE + watchFrom * PAGE_SIZE, (watchTo - watchFrom) * PAGE_SIZE,
                (nn, range, seq) -> {
                    nn.setSeq(seq);
                    calls[0]++;
                    if (seq < lastSeq[0]) {
                        problems.add("sequence went back: " + seq + " after " + lastSeq[0]);
                    }
                    lastSeq[0] = seq;
                    watchedFrames.forEach((va, pfn) -> {
                        if (va >= range.start() && va < range.end() && PhysicalMemory.of(mm).isFree(pfn)) {
                            problems.add(range.event() + ": frame " + pfn + " of 0x" + Long.toHexString(va) + " freed before the callback");
                        }
                    });
                    return true;
                });
        for (Op op : ops) {
            int from = op.page();
            int to = Math.min(PAGES, from + op.npages());
            long va = BASE + from * PAGE_SIZE;
            long len = (to - from) * PAGE_SIZE;
            boolean allMapped = true;
            boolean anyMapped = false;
            for (int i = from; i < to; i++) {
                allMapped &= model.containsKey(i);
                anyMapped |= model.containsKey(i);
            }
            // the frames of the watched range as they are before the operation
            watchedFrames.clear();
            for (int i = watchFrom; i < watchTo; i++) {
                long pfn = p.pfnOf(BASE + i * PAGE_SIZE);
                if (pfn >= 0) {
                    watchedFrames.put(BASE + i * PAGE_SIZE, pfn);
                }
            }
            int callsBefore = calls[0];
            boolean changesWatched = false;
            boolean touchesWatched = from < watchTo && watchFrom < to;
            try {
                switch (op.kind()) {
                    case WRITE -> {
                        if (model.containsKey(from) && writable[from]) {
                            p.writeLong(va + 8, op.value());
                            model.put(from, op.value());
                        } else {
                            expectSegv(() -> p.writeLong(va + 8, op.value()), op);
                        }
                    }
                    case READ -> {
                        if (model.containsKey(from)) {
                            check(p.readLong(va + 8) == model.get(from), op, "read " + p.readLong(va + 8) + " expected " + model.get(from));
                        } else {
                            expectSegv(() -> p.readLong(va + 8), op);
                        }
                    }
                    case MUNMAP -> {
                        if (anyMapped) {
                            p.munmap(va, len);
                            for (int i = from; i < to; i++) {
                                model.remove(i);
                            }
                            changesWatched = touchesWatched;
                        } else {
                            expectErrno(() -> p.munmap(va, len), KernelException.Errno.EINVAL, op);
                        }
                    }
                    case MMAP -> {
                        if (!anyMapped) {
                            p.mmap(va, len, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.ANON, "prop");
                            for (int i = from; i < to; i++) {
                                model.put(i, 0L);
                                writable[i] = true;
                            }
                        } else {
                            expectErrno(() -> p.mmap(va, len, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.ANON, "prop"),
                                    KernelException.Errno.EINVAL, op);
                        }
                    }
                    case PAGEOUT, DONTNEED, MIGRATE, RDONLY, RDWR -> {
                        if (!allMapped) {
                            expectErrno(() -> apply(p, op.kind(), va, len), KernelException.Errno.ENOMEM, op);
                        } else {
                            apply(p, op.kind(), va, len);
                            changesWatched = touchesWatched;
                            for (int i = from; i < to; i++) {
                                if (op.kind() == Kind.DONTNEED) {
                                    model.put(i, 0L); // a pinned frame stays with its pin; the page starts fresh
                                }
                                if (op.kind() == Kind.RDONLY) {
                                    writable[i] = false;
                                } else if (op.kind() == Kind.RDWR) {
                                    writable[i] = true;
                                }
                            }
                        }
                    }
                    case PIN -> {
                        boolean ok = allMapped;
                        for (int i = from; i < to && ok; i++) {
                            ok = writable[i];
                        }
                        if (ok) {
                            pins.add(p.pinUserPages(va, len, true));
                        } else {
                            expectErrno(() -> p.pinUserPages(va, len, true), KernelException.Errno.EFAULT, op);
                        }
                    }
                    case UNPIN -> {
                        if (!pins.isEmpty()) {
                            PinnedPages pp = pins.remove(op.npages() % pins.size());
                            pp.unpin(true);
                            expectErrno(() -> pp.unpin(true), KernelException.Errno.EINVAL, op);
                        }
                    }
                    case RECLAIM -> mm.reclaim(op.npages() * 4L);
                }
            } catch (KernelException e) {
                if (e.errno() != KernelException.Errno.ENOMEM) {
                    throw new AssertionError(op + ": unexpected " + e.getMessage(), e);
                }
                // ENOMEM under pinned pressure is a legal outcome; the model did not change
                return;
            }
            if (changesWatched && calls[0] == callsBefore) {
                problems.add(op + " changed the watched range without a callback");
            }
            if (!problems.isEmpty()) {
                throw new AssertionError(problems.toString());
            }
            checkFrames(mm, p, pins);
        }
        for (var e : model.entrySet()) {
            long got = p.readLong(BASE + e.getKey() * PAGE_SIZE + 8);
            check(got == e.getValue(), null, "page " + e.getKey() + " holds " + got + ", model " + e.getValue());
        }
        n.remove();
        for (PinnedPages pp : pins) {
            pp.unpin(false);
        }
        check(p.pinnedPages() == 0, null, "pinned_vm back to 0");
    }

    private static void apply(AddressSpace p, Kind k, long va, long len) {
        switch (k) {
            case PAGEOUT -> p.madvise(va, len, AddressSpace.Advice.MADV_PAGEOUT);
            case DONTNEED -> p.madvise(va, len, AddressSpace.Advice.MADV_DONTNEED);
            case MIGRATE -> p.migrate(va, len);
            case RDONLY -> p.mprotect(va, len, Vma.PROT_READ);
            case RDWR -> p.mprotect(va, len, Vma.PROT_READ | Vma.PROT_WRITE);
            default -> throw new IllegalArgumentException(k.toString());
        }
    }

    /** Allocated frames are exactly the resident pages plus the pinned frames no page maps any more; no frame twice. */
    private static void checkFrames(Mm mm, AddressSpace p, List<PinnedPages> pins) {
        PhysicalMemory pm = PhysicalMemory.of(mm);
        Set<Long> mapped = new HashSet<>();
        for (int i = 0; i < PAGES; i++) {
            long pfn = p.pfnOf(BASE + i * PAGE_SIZE);
            if (pfn >= 0) {
                check(mapped.add(pfn), null, "frame " + pfn + " mapped twice");
                check(!pm.isFree(pfn), null, "page " + i + " maps free frame " + pfn);
                check(pm.rmap(pfn) == (((long) p.pid() << 36) | ((BASE >>> 12) + i)), null, "rmap of frame " + pfn);
            }
        }
        check(mapped.size() == p.rssPages(), null, "rss " + p.rssPages() + " but " + mapped.size() + " pages mapped");
        Set<Long> orphans = new HashSet<>();
        for (PinnedPages pp : pins) {
            for (long pfn : pp.pfns()) {
                check(!pm.isFree(pfn), null, "pinned frame " + pfn + " is free");
                check(pm.pinCount(pfn) > 0, null, "pinned frame " + pfn + " has no pin count");
                if (!mapped.contains(pfn)) {
                    orphans.add(pfn);
                }
            }
        }
        long allocated = pm.nrFrames() - pm.freeFrames();
        check(allocated == mapped.size() + orphans.size(), null,
                "allocated " + allocated + " = mapped " + mapped.size() + " + pinned orphans " + orphans.size());
    }

    private static void expectSegv(Runnable r, Op op) {
        try {
            r.run();
        } catch (SegmentationFault expected) {
            return;
        }
        throw new AssertionError(op + ": expected SIGSEGV");
    }

    private static void expectErrno(Runnable r, KernelException.Errno errno, Op op) {
        try {
            r.run();
        } catch (KernelException e) {
            check(e.errno() == errno, op, "expected " + errno + " got " + e.getMessage());
            return;
        }
        throw new AssertionError(op + ": expected " + errno);
    }

    private static void check(boolean ok, Op op, String what) {
        if (!ok) {
            throw new AssertionError((op == null ? "" : op + ": ") + what);
        }
    }
}
