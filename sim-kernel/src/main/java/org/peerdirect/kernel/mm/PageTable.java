package org.peerdirect.kernel.mm;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A 4-level x86-64 style page table over 47-bit virtual addresses: PGD → PUD → PMD → PTE, 512
 * entries per level; a PMD entry is either a pointer to a PTE table or a 2 MiB leaf.
 *
 * <p>Entries are longs: {@code pfn << 12 | flags}, or a swap entry. Untouched ranges cost
 * nothing: tables exist only where something was mapped. Entries are read with acquire and
 * written with release semantics so lock-free readers see whole entries.
 *
 * <p>Locks: writers hold the owning address space's page-table lock or its mmap write lock.
 */
final class PageTable {

    static final long PRESENT = 1L;
    static final long WRITE = 1L << 1;
    static final long ACCESSED = 1L << 2;
    static final long DIRTY = 1L << 3;
    static final long HUGE = 1L << 4;
    /** Not present, the page is in swap: the slot is in the pfn bits. */
    static final long SWAP = 1L << 5;
    /**
     * Not present, but the frame in the pfn bits is still mapped (mprotect PROT_NONE,
     * {@code _PAGE_PROTNONE}): the next allowed access makes it present again.
     */
    static final long PROTNONE = 1L << 6;
    static final long FLAGS_MASK = 0xfffL;

    static final int VA_BITS = 47;
    static final long TASK_SIZE = 1L << VA_BITS;

    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final VarHandle OBJS = MethodHandles.arrayElementVarHandle(Object[].class);

    /** A PMD table: 2 MiB leaves in {@code leaf}, PTE tables in {@code pte}. */
    static final class Pmd {
        final long[] leaf = new long[512];
        final long[][] pte = new long[512][];
    }

    private final Object[] pgd = new Object[512];
    /** Number of PTE tables (4 KiB each), for the memory-overhead figures. */
    private long pteTables;

    static long pfn(long entry) {
        return entry >>> 12;
    }

    static long entry(long pfn, long flags) {
        return (pfn << 12) | flags;
    }

    /** The frame backing va in the present entry mapping it: the subpage of a 2 MiB leaf. */
    static long pfnAt(long entry, long va) {
        return pfn(entry) + ((entry & HUGE) != 0 ? (va & (Mm.HPAGE_SIZE - 1)) >>> Mm.PAGE_SHIFT : 0);
    }

    private static int idx(long va, int shift) {
        return (int) ((va >>> shift) & 511);
    }

    private Pmd pmd(long va, boolean create) {
        Object[] pud = (Object[]) OBJS.getAcquire(pgd, idx(va, 39));
        if (pud == null) {
            if (!create) {
                return null;
            }
            pud = new Object[512];
            OBJS.setRelease(pgd, idx(va, 39), pud);
        }
        Pmd pmd = (Pmd) OBJS.getAcquire(pud, idx(va, 30));
        if (pmd == null && create) {
            pmd = new Pmd();
            OBJS.setRelease(pud, idx(va, 30), pmd);
        }
        return pmd;
    }

    /** The entry mapping va: a 4 KiB PTE, a 2 MiB leaf (HUGE set), or 0. */
    long lookup(long va) {
        Pmd pmd = pmd(va, false);
        if (pmd == null) {
            return 0;
        }
        int i = idx(va, 21);
        long leaf = (long) LONGS.getAcquire(pmd.leaf, i);
        if (leaf != 0) {
            return leaf;
        }
        long[] pte = pmd.pte[i];
        return pte == null ? 0 : (long) LONGS.getAcquire(pte, idx(va, 12));
    }

    /** True when the 2 MiB region holding va has a leaf or a PTE table (which may still be all empty). */
    boolean hasRegion(long va) {
        Pmd pmd = pmd(va, false);
        if (pmd == null) {
            return false;
        }
        int i = idx(va, 21);
        return (long) LONGS.getAcquire(pmd.leaf, i) != 0 || pmd.pte[i] != null;
    }

    void setPte(long va, long entry) {
        Pmd pmd = pmd(va, entry != 0);
        if (pmd == null) {
            return;
        }
        int i = idx(va, 21);
        long[] pte = pmd.pte[i];
        if (pte == null) {
            if (entry == 0) {
                return;
            }
            pte = new long[512];
            pmd.pte[i] = pte;
            pteTables++;
        }
        LONGS.setRelease(pte, idx(va, 12), entry);
    }

    /** Updates flag bits of an existing 4 KiB entry or 2 MiB leaf if it is still {@code expect}. */
    boolean updateFlags(long va, long expect, long update) {
        Pmd pmd = pmd(va, false);
        if (pmd == null) {
            return false;
        }
        int i = idx(va, 21);
        if ((expect & HUGE) != 0) {
            return LONGS.compareAndSet(pmd.leaf, i, expect, update);
        }
        long[] pte = pmd.pte[i];
        return pte != null && LONGS.compareAndSet(pte, idx(va, 12), expect, update);
    }

    void setHuge(long va, long entry) {
        Pmd pmd = pmd(va, entry != 0);
        if (pmd != null) {
            LONGS.setRelease(pmd.leaf, idx(va, 21), entry);
        }
    }

    @FunctionalInterface
    interface EntryVisitor {
        void visit(long va, long entry);
    }

    /**
     * Visits the non-empty entries of [start, end), a 2 MiB leaf once, at its base (which may lie
     * before {@code start}). Skips 2 MiB regions without a table. The visitor may change the entry
     * it is given.
     *
     * @see "walk_page_range() in mm/pagewalk.c"
     */
    void forEachEntry(long start, long end, EntryVisitor visitor) {
        long va = start;
        while (va < end) {
            if (!hasRegion(va)) {
                va = (va & -Mm.HPAGE_SIZE) + Mm.HPAGE_SIZE;
                continue;
            }
            long e = lookup(va);
            if ((e & HUGE) != 0) {
                visitor.visit(va & -Mm.HPAGE_SIZE, e);
                va = (va & -Mm.HPAGE_SIZE) + Mm.HPAGE_SIZE;
                continue;
            }
            if (e != 0) {
                visitor.visit(va, e);
            }
            va += Mm.PAGE_SIZE;
        }
    }

    /**
     * Replaces the entry {@code old} at va by {@code now}, at the level {@code old} sits at (a 2
     * MiB leaf when it is HUGE, a PTE otherwise).
     *
     * @see "set_pte_at(), set_pmd_at()"
     */
    void setEntry(long va, long old, long now) {
        if ((old & HUGE) != 0) {
            setHuge(va, now);
        } else {
            setPte(va, now);
        }
    }

    long pteTables() {
        return pteTables;
    }
}
