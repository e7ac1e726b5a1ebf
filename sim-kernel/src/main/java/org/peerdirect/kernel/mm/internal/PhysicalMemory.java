package org.peerdirect.kernel.mm.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.BitSet;

import java.util.function.Function;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;

/**
 * Physical memory: {@code nrFrames} 4 KiB frames held off-heap, a buddy allocator up to
 * {@link #MAX_ORDER} (order 9 = 2 MiB huge pages are real contiguous frames), and the frame
 * table ({@code mem_map}: one {@code struct page} per frame) kept off-heap too, so Java heap
 * does not grow with memory size.
 *
 * <p>The frames are an anonymous {@code mmap(MAP_NORESERVE)} of the host (through the FFM
 * linker), so untouched memory costs the host nothing; if the native call is unavailable it
 * falls back to an {@link Arena} allocation.
 *
 * <p>Frame states: FREE, or allocated to an owner kind (ANON, KERNEL, HUGE_TAIL for the tail
 * frames of a huge page). A frame is released by {@link #freePages} only: poisoned (when
 * enabled), its generation bumped, back to the buddy lists. The generation lets the IOMMU tell a
 * stale DMA mapping from a live one: a mapping remembers the generation it was made with.
 *
 * <p>Locks: the allocator lock ({@code this}) guards the free lists and frame states. Pin and
 * DMA-reference counts are atomic per frame and need no lock.
 */
public final class PhysicalMemory implements AutoCloseable {

    public static final int PAGE_SHIFT = Mm.PAGE_SHIFT;
    public static final long PAGE_SIZE = Mm.PAGE_SIZE;
    public static final int MAX_ORDER = Mm.MAX_ORDER;
    public static final int HPAGE_ORDER = Mm.HPAGE_ORDER;
    public static final long HPAGE_SIZE = Mm.HPAGE_SIZE;
    /** What a freed frame is filled with, so a stray read of freed memory is recognisable. */
    public static final long POISON = 0x6b6b6b6b6b6b6b6bL; // POISON_FREE of mm/slab

    /** Frame kinds (low 4 bits of the flags word). */
    public static final int FREE = 0;
    public static final int ANON = 1;
    public static final int KERNEL = 2;
    public static final int HUGE_TAIL = 3;
    public static final int PAGECACHE = 4;

    // struct page, 24 bytes: flags(int) pin(int) gen(int) dmaRefs(int) rmap(long)
    private static final long PAGE_STRUCT = 24;
    private static final long F_FLAGS = 0;
    private static final long F_PIN = 4;
    private static final long F_GEN = 8;
    private static final long F_DMA = 12;
    private static final long F_RMAP = 16;
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private final int nrFrames;
    private final Arena arena;
    private final MemorySegment frames;
    private final MemorySegment memMap;
    private final boolean poison;
    /** Free block heads per order; guarded by this. */
    private final BitSet[] freeArea = new BitSet[MAX_ORDER + 1];
    private final int[] hint = new int[MAX_ORDER + 1];
    private long nrFree;
    private long nrHuge;
    private volatile Reclaimer reclaimer;
    /**
     * Frames freed while an IOMMU mapping pointed at them. Written under this (the allocator lock),
     * read without it: while it is 0 no mapped frame was ever freed, so the IOMMU can skip the
     * per-page generation check (the check only matters once a driver bug happened).
     */
    private volatile long freedWhileDmaMapped;

    /** Called when an allocation finds no free block: frees what it can, returns frames freed. */
    @FunctionalInterface
    public interface Reclaimer {
        long reclaim(long wantedFrames);
    }

    /**
     * How this package reaches an {@link Mm}'s frames without a public accessor on {@code Mm}
     * (whose package is exported): {@code Mm}'s class initialiser hands over a function once, as
     * the JDK's {@code SharedSecrets} do. Written once, before any {@code Mm} exists.
     */
    private static volatile Function<Mm, PhysicalMemory> ownerAccess;

    /** Called once, by {@code Mm}'s class initialiser. */
    public static void setOwnerAccess(Function<Mm, PhysicalMemory> access) {
        synchronized (PhysicalMemory.class) {
            if (ownerAccess != null) {
                throw new IllegalStateException("the frames' owner access is set already");
            }
            ownerAccess = access;
        }
    }

    /** The frames of {@code mm}: for the IOMMU and tests of this bundle only. */
    public static PhysicalMemory of(Mm mm) {
        return ownerAccess.apply(mm);
    }

    public PhysicalMemory(long bytes, boolean poison) {
        if (bytes < PAGE_SIZE || bytes % PAGE_SIZE != 0) {
            throw new KernelException(Errno.EINVAL, "physical memory size " + bytes + " is not a positive multiple of 4096");
        }
        if (bytes / PAGE_SIZE > Integer.MAX_VALUE) {
            throw new KernelException(Errno.EINVAL, "physical memory size " + bytes + " is too large (at most 2^31 frames)");
        }
        this.nrFrames = (int) (bytes / PAGE_SIZE);
        this.poison = poison;
        this.arena = Arena.ofShared();
        this.frames = mapAnonymous(bytes, arena);
        this.memMap = arena.allocate(PAGE_STRUCT * nrFrames, 8);
        for (int o = 0; o <= MAX_ORDER; o++) {
            freeArea[o] = new BitSet();
        }
        // carve the frames into the largest aligned blocks
        int pfn = 0;
        while (pfn < nrFrames) {
            int order = MAX_ORDER;
            while (order > 0 && ((pfn & ((1 << order) - 1)) != 0 || pfn + (1 << order) > nrFrames)) {
                order--;
            }
            freeArea[order].set(pfn);
            nrFree += 1L << order;
            pfn += 1 << order;
        }
    }

    /**
     * {@code bytes} of zeroed host memory the host commits page by page on first touch (an
     * anonymous {@code mmap(MAP_NORESERVE)}), freed with {@code arena}; an {@link Arena}
     * allocation where that call is not available.
     */
    public static MemorySegment mapAnonymous(long bytes, Arena arena) {
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle mmap = linker.downcallHandle(linker.defaultLookup().find("mmap").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                            ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
            MethodHandle munmap = linker.downcallHandle(linker.defaultLookup().find("munmap").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
            final int protRw = 0x1 | 0x2;
            final int mapPrivateAnonNoreserve = 0x02 | 0x20 | 0x4000; // Linux x86-64/aarch64 values
            MemorySegment p = (MemorySegment) mmap.invokeExact(MemorySegment.NULL, bytes, protRw,
                    mapPrivateAnonNoreserve, -1, 0L);
            if (p.address() == -1L || p.address() == 0L) {
                throw new IllegalStateException("mmap failed");
            }
            return p.reinterpret(bytes, arena, seg -> {
                try {
                    int rc = (int) munmap.invokeExact(seg, bytes);
                    assert rc == 0;
                } catch (Throwable t) {
                    // the process is ending the arena; nothing else to do
                }
            });
        } catch (Throwable notAvailable) {
            return arena.allocate(bytes, PAGE_SIZE);
        }
    }

    public int nrFrames() {
        return nrFrames;
    }

    public long totalBytes() {
        return (long) nrFrames << PAGE_SHIFT;
    }

    public synchronized long freeFrames() {
        return nrFree;
    }

    public synchronized long hugePagesInUse() {
        return nrHuge;
    }

    public boolean poisoning() {
        return poison;
    }

    public void setReclaimer(Reclaimer r) {
        this.reclaimer = r;
    }

    /** The bytes of one frame; valid only while the frame is allocated to the caller. */
    public MemorySegment frame(long pfn) {
        checkPfn(pfn);
        return frames.asSlice(pfn << PAGE_SHIFT, PAGE_SIZE);
    }

    /** All of physical memory; device models never touch this except through the IOMMU. */
    public MemorySegment memory() {
        return frames;
    }

    private void checkPfn(long pfn) {
        if (pfn < 0 || pfn >= nrFrames) {
            throw new KernelException(Errno.EINVAL, "pfn " + pfn + " outside physical memory (0.." + (nrFrames - 1) + ")");
        }
    }

    /**
     * {@code alloc_pages}: 2^order contiguous, aligned frames, zeroed, of the given kind. Runs the
     * reclaimer once when memory is short; fails with ENOMEM, never a JVM error.
     */
    public long allocPages(int order, int kind, long rmap) {
        long pfn = tryAllocPages(order, kind, rmap);
        Reclaimer r = reclaimer;
        if (pfn < 0 && r != null) {
            r.reclaim(Math.max(32, 1L << order));
            pfn = tryAllocPages(order, kind, rmap);
        }
        if (pfn < 0) {
            throw new KernelException(Errno.ENOMEM, "out of memory: no free block of order " + order + " ("
                    + freeFrames() + " frames free of " + nrFrames + "; pinned pages cannot be reclaimed)");
        }
        return pfn;
    }

    /** Like {@link #allocPages} but without reclaim: -1 when no block is free (the caller retries). */
    public long tryAllocPages(int order, int kind, long rmap) {
        if (order < 0 || order > MAX_ORDER) {
            throw new KernelException(Errno.EINVAL, "order " + order + " outside 0.." + MAX_ORDER);
        }
        long pfn = tryAlloc(order, kind, rmap);
        if (pfn >= 0) {
            // zeroed outside the allocator lock
            frames.asSlice(pfn << PAGE_SHIFT, PAGE_SIZE << order).fill((byte) 0);
        }
        return pfn;
    }

    private synchronized long tryAlloc(int order, int kind, long rmap) {
        int o = order;
        while (o <= MAX_ORDER && freeArea[o].isEmpty()) {
            o++;
        }
        if (o > MAX_ORDER) {
            return -1;
        }
        int pfn = freeArea[o].nextSetBit(hint[o]);
        if (pfn < 0) {
            pfn = freeArea[o].nextSetBit(0);
        }
        freeArea[o].clear(pfn);
        hint[o] = pfn;
        // split down to the wanted order, giving back the upper halves
        while (o > order) {
            o--;
            freeArea[o].set(pfn + (1 << o));
        }
        nrFree -= 1L << order;
        if (order == HPAGE_ORDER) {
            nrHuge++;
        }
        for (int i = 0; i < (1 << order); i++) {
            long p = pfn + i;
            setFlags(p, i == 0 ? (kind | (order << 4)) : HUGE_TAIL);
            LONG.set(memMap, p * PAGE_STRUCT + F_RMAP, rmap);
        }
        return pfn;
    }

    /**
     * {@code __free_pages}: returns a block. Refuses (EINVAL) a frame that is free already or
     * pinned. A frame still referenced by an IOMMU mapping is freed anyway but counted: the
     * mapping is now stale, and the IOMMU refuses DMA through it as use-after-free.
     */
    public void freePages(long pfn, int order) {
        checkPfn(pfn);
        synchronized (this) {
            int flags = flags(pfn);
            if ((flags & 0xf) == FREE || (flags & 0xf) == HUGE_TAIL) {
                throw new KernelException(Errno.EINVAL, "double free of pfn " + pfn);
            }
            if (((flags >>> 4) & 0xf) != order) {
                throw new KernelException(Errno.EINVAL, "pfn " + pfn + " was allocated with order "
                        + ((flags >>> 4) & 0xf) + ", freed with order " + order);
            }
            for (int i = 0; i < (1 << order); i++) {
                if (pinCount(pfn + i) != 0) {
                    throw new KernelException(Errno.EINVAL, "freeing pinned pfn " + (pfn + i) + " (pin count "
                            + pinCount(pfn + i) + ")");
                }
            }
            for (int i = 0; i < (1 << order); i++) {
                long p = pfn + i;
                if ((int) INT.getVolatile(memMap, p * PAGE_STRUCT + F_DMA) != 0) {
                    freedWhileDmaMapped++;
                }
                INT.getAndAdd(memMap, p * PAGE_STRUCT + F_GEN, 1);
                setFlags(p, FREE);
                LONG.set(memMap, p * PAGE_STRUCT + F_RMAP, 0L);
            }
            if (poison) {
                frames.asSlice(pfn << PAGE_SHIFT, PAGE_SIZE << order).fill((byte) 0x6b);
            }
            if (order == HPAGE_ORDER) {
                nrHuge--;
            }
            nrFree += 1L << order;
            // merge with free buddies
            long p = pfn;
            int o = order;
            while (o < MAX_ORDER) {
                long buddy = p ^ (1L << o);
                if (buddy + (1L << o) > nrFrames || !freeArea[o].get((int) buddy)) {
                    break;
                }
                freeArea[o].clear((int) buddy);
                p = Math.min(p, buddy);
                o++;
            }
            freeArea[o].set((int) p);
        }
    }

    /** Frames freed while an IOMMU mapping still pointed at them (a driver bug the audit reports). */
    public long freedWhileDmaMapped() {
        return freedWhileDmaMapped;
    }

    private int flags(long pfn) {
        return (int) INT.getVolatile(memMap, pfn * PAGE_STRUCT + F_FLAGS);
    }

    private void setFlags(long pfn, int f) {
        INT.setVolatile(memMap, pfn * PAGE_STRUCT + F_FLAGS, f);
    }

    public int kind(long pfn) {
        checkPfn(pfn);
        return flags(pfn) & 0xf;
    }

    /** Order of the block a head frame starts; 0 for tails and free frames. */
    public int order(long pfn) {
        checkPfn(pfn);
        int f = flags(pfn);
        return (f & 0xf) == HUGE_TAIL ? 0 : (f >>> 4) & 0xf;
    }

    /** The first frame of the allocated block holding pfn (the huge page head for a tail). */
    public long head(long pfn) {
        return kind(pfn) == HUGE_TAIL ? pfn & -(1L << HPAGE_ORDER) : pfn;
    }

    public boolean isFree(long pfn) {
        return kind(pfn) == FREE;
    }

    public int generation(long pfn) {
        return (int) INT.getVolatile(memMap, pfn * PAGE_STRUCT + F_GEN);
    }

    public int pinCount(long pfn) {
        return (int) INT.getVolatile(memMap, pfn * PAGE_STRUCT + F_PIN);
    }

    /** Adds to the pin count of an allocated frame; returns the new count. */
    public int pin(long pfn, int delta) {
        int now = (int) INT.getAndAdd(memMap, pfn * PAGE_STRUCT + F_PIN, delta) + delta;
        if (now < 0) {
            INT.getAndAdd(memMap, pfn * PAGE_STRUCT + F_PIN, -delta);
            throw new KernelException(Errno.EINVAL, "unpin of pfn " + pfn + " that is not pinned (double unpin?)");
        }
        return now;
    }

    public int dmaRefs(long pfn) {
        return (int) INT.getVolatile(memMap, pfn * PAGE_STRUCT + F_DMA);
    }

    public void dmaRef(long pfn, int delta) {
        INT.getAndAdd(memMap, pfn * PAGE_STRUCT + F_DMA, delta);
    }

    public long rmap(long pfn) {
        return (long) LONG.getVolatile(memMap, pfn * PAGE_STRUCT + F_RMAP);
    }

    public void setRmap(long pfn, long rmap) {
        LONG.setVolatile(memMap, pfn * PAGE_STRUCT + F_RMAP, rmap);
    }

    /** Counts frames matching a predicate on (pfn); for statistics, not for the data path. */
    public long count(java.util.function.LongPredicate p) {
        long n = 0;
        for (long pfn = 0; pfn < nrFrames; pfn++) {
            if (p.test(pfn)) {
                n++;
            }
        }
        return n;
    }

    /** Reads a long from a frame (kernel-side access, e.g. to check poison). */
    public long readLong(long pfn, long offset) {
        return frames.get(ValueLayout.JAVA_LONG_UNALIGNED, (pfn << PAGE_SHIFT) + offset);
    }


    @Override
    public void close() {
        arena.close();
    }
}
