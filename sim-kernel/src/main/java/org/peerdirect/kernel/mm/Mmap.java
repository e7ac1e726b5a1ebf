package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.HPAGE_SIZE;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.UnaryOperator;

import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The VMA tree of an {@link AddressSpace}: mm/mmap.c ({@code mmap}, {@code munmap},
 * {@code find_vma}, {@code vma_merge}, {@code exit_mmap}) and mm/mprotect.c.
 *
 * <p>Holds no state: each method works on the {@code mm} it is given, under the locks its
 * Javadoc names (asserted). The tree itself, {@code mm.vmas}, changes only under the mmap lock
 * in write mode; lookups need it in either mode.
 */
final class Mmap {

    /** Lowest address mmap picks without a hint (like mmap_min_addr + a gap). */
    static final long MMAP_BASE = 0x10000000L;

    private Mmap() {
    }

    private static long checkRange(long addr, long len, long align, String what) {
        if (len <= 0) {
            throw new KernelException(Errno.EINVAL, what + ": length " + len + " must be positive");
        }
        if ((addr & (align - 1)) != 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: address 0x%x is not aligned to %d", what, addr, align));
        }
        long rounded = (len + align - 1) & -align;
        if (rounded < len || addr < 0 || addr + rounded < addr || addr + rounded > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.EOVERFLOW, String.format("%s: range 0x%x + %d leaves the 128 TiB address space", what, addr, len));
        }
        return rounded;
    }

    private static void checkProt(int prot) {
        if ((prot & ~(Vma.PROT_READ | Vma.PROT_WRITE)) != 0) {
            throw new KernelException(Errno.EINVAL, "unknown protection bits 0x" + Integer.toHexString(prot));
        }
    }

    // ---------------------------------------------------------------------------------- mmap

    /** @see AddressSpace#mmap(long, long, int, Vma.Kind, String) */
    static long mmap(AddressSpace mm, long addr, long length, int prot, Vma.Kind kind, String name) {
        if (kind == Vma.Kind.DEVICE) {
            throw new KernelException(Errno.EINVAL, "device mappings are made with mmapDevice");
        }
        return insertVma(mm, addr, length, prot, kind, name, null, null, 0);
    }

    /** @see AddressSpace#mmapDevice(long, List, int, String) */
    static long mmapDevice(AddressSpace mm, long addr, List<MemorySegment> pieces, int prot, String name) {
        if (pieces.isEmpty()) {
            throw new KernelException(Errno.EINVAL, "mmap of device memory: no pieces");
        }
        long total = 0;
        for (MemorySegment p : pieces) {
            if (p == null || p.byteSize() == 0 || p.byteSize() % PAGE_SIZE != 0) {
                throw new KernelException(Errno.EINVAL, "device memory must be non-empty multiples of 4096 bytes");
            }
            total += p.byteSize();
        }
        return insertVmas(mm, addr, total, PAGE_SIZE, prot, (start, len) -> {
            List<Vma> out = new ArrayList<>();
            long at = start;
            for (MemorySegment p : pieces) {
                out.add(new Vma(at, at + p.byteSize(), prot, Vma.Kind.DEVICE, name, p, null, 0));
                at += p.byteSize();
            }
            return out;
        });
    }

    /** @see AddressSpace#mmapFile */
    static long mmapFile(AddressSpace mm, long addr, Path path, long offset, long length, int prot, String name) {
        if (offset < 0 || (offset & (PAGE_SIZE - 1)) != 0) {
            throw new KernelException(Errno.EINVAL, "mmap of " + path + ": offset " + offset + " is not page aligned");
        }
        MappedFile f = new MappedFile(path, (prot & Vma.PROT_WRITE) != 0);
        try {
            return insertVma(mm, addr, length, prot, Vma.Kind.FILE, name != null ? name : path.toString(), null, f, offset);
        } catch (RuntimeException e) {
            f.close();
            throw e;
        }
    }

    private static long insertVma(AddressSpace mm, long addr, long length, int prot, Vma.Kind kind, String vname,
            MemorySegment device, MappedFile file, long offset) {
        long align = kind == Vma.Kind.HUGETLB ? HPAGE_SIZE : PAGE_SIZE;
        return insertVmas(mm, addr, length, align, prot,
                (start, len) -> List.of(new Vma(start, start + len, prot, kind, vname, device, file, offset)));
    }

    /**
     * {@code mmap}'s common part: checks, picks or checks the address, and inserts the VMAs
     * {@code make} builds for [start, start+len) under the mmap lock in write mode.
     *
     * @see "do_mmap() in mm/mmap.c"
     */
    private static long insertVmas(AddressSpace mm, long addr, long length, long align, int prot,
            BiFunction<Long, Long, List<Vma>> make) {
        checkProt(prot);
        long len = checkRange(addr, length, align, "mmap");
        long stamp = mm.mmapLock.writeLock();
        try {
            mm.alive();
            long start = addr != 0 ? addr : findFree(mm, len, align);
            if (overlapsVma(mm, start, start + len)) {
                throw new KernelException(Errno.EINVAL, String.format("mmap: 0x%x-0x%x overlaps an existing mapping", start, start + len));
            }
            for (Vma v : make.apply(start, len)) {
                mm.vmas.put(v.start(), v);
            }
            return start;
        } finally {
            mm.mmapLock.unlockWrite(stamp);
        }
    }

    /**
     * The lowest {@code align}ed gap of {@code len} bytes at or above {@link #MMAP_BASE}. Caller
     * holds write: the gap must still be free when the VMA goes in.
     *
     * @see "get_unmapped_area() in mm/mmap.c"
     */
    private static long findFree(AddressSpace mm, long len, long align) {
        assert mm.mmapLock.isWriteLocked();
        long cur = MMAP_BASE;
        for (Vma v : mm.vmas.values()) {
            if (v.end() <= cur) {
                continue;
            }
            if (v.start() >= cur + len) {
                break;
            }
            cur = (v.end() + align - 1) & -align;
        }
        if (cur + len > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.ENOMEM, "mmap: no free range of " + len + " bytes");
        }
        return cur;
    }

    private static boolean overlapsVma(AddressSpace mm, long start, long end) {
        assert mm.mmapLocked();
        Map.Entry<Long, Vma> e = mm.vmas.lowerEntry(end);
        return e != null && e.getValue().end() > start;
    }

    /**
     * The VMA holding va, or null (where {@code find_vma} would return the next VMA above a
     * hole). Caller holds the mmap lock (either mode).
     *
     * @see "find_vma() in mm/mmap.c"
     */
    static Vma findVma(AddressSpace mm, long va) {
        assert mm.mmapLocked();
        Map.Entry<Long, Vma> e = mm.vmas.floorEntry(va);
        return e != null && e.getValue().end() > va ? e.getValue() : null;
    }

    /** VMAs intersecting [start, end), clipped. Caller holds the mmap lock (either mode). */
    static List<Vma> vmasIn(AddressSpace mm, long start, long end) {
        assert mm.mmapLocked();
        List<Vma> out = new ArrayList<>();
        Map.Entry<Long, Vma> first = mm.vmas.floorEntry(start);
        Long from = first != null && first.getValue().end() > start ? first.getKey() : start;
        for (Vma v : mm.vmas.subMap(from, true, end, false).values()) {
            out.add(v.slice(Math.max(start, v.start()), Math.min(end, v.end())));
        }
        return out;
    }

    /**
     * Replaces the parts of VMAs inside [start, end) by {@code replace} (null removes), then
     * merges. Caller holds write.
     *
     * @see "split_vma() in mm/mmap.c"
     */
    private static void splitReplace(AddressSpace mm, long start, long end, UnaryOperator<Vma> replace) {
        assert mm.mmapLock.isWriteLocked();
        for (Vma v : vmasIn(mm, start, end)) {
            assert maySplit(v) : "the caller did not checkHugeSplit: " + v;
            Vma whole = findVma(mm, v.start());
            mm.vmas.remove(whole.start());
            if (whole.start() < v.start()) {
                mm.vmas.put(whole.start(), whole.slice(whole.start(), v.start()));
            }
            if (v.end() < whole.end()) {
                mm.vmas.put(v.end(), whole.slice(v.end(), whole.end()));
            }
            Vma r = replace.apply(v);
            if (r != null) {
                mm.vmas.put(r.start(), r);
            }
        }
        mergeAround(mm, start, end);
    }

    /**
     * True when {@code part}, a VMA clipped to a range, may be cut out of its VMA: its ends are
     * the VMA's own or split points, and a hugetlb VMA is split only at a huge page boundary (a
     * 2 MiB entry has one protection and goes whole, so a split inside it would leave part of the
     * page with the other side's attributes).
     *
     * @see "hugetlb_vm_op_split() in mm/hugetlb.c, the vm_ops->may_split that __split_vma() calls"
     */
    private static boolean maySplit(Vma part) {
        return part.kind() != Vma.Kind.HUGETLB || ((part.start() | part.end()) & (HPAGE_SIZE - 1)) == 0;
    }

    /**
     * Refuses with EINVAL, before anything changes, a call on [start, end) that would split a
     * hugetlb VMA inside a huge page. {@code parts} are the VMAs in the range, clipped to it
     * ({@link #vmasIn}). Every call that splits VMAs ({@link #splitReplace}) checks this first.
     */
    private static void checkHugeSplit(List<Vma> parts, long start, long end, String what) {
        for (Vma v : parts) {
            if (!maySplit(v)) {
                long at = (v.start() & (HPAGE_SIZE - 1)) != 0 ? v.start() : v.end();
                throw new KernelException(Errno.EINVAL, String.format(
                        "%s: 0x%x-0x%x splits a 2 MiB huge page of %s at 0x%x: hugetlb mappings are split only at 2 MiB boundaries",
                        what, start, end, v.name(), at));
            }
        }
    }

    /**
     * Joins touching VMAs with equal attributes around [start, end). Caller holds write.
     *
     * @see "vma_merge() in mm/mmap.c"
     */
    private static void mergeAround(AddressSpace mm, long start, long end) {
        assert mm.mmapLock.isWriteLocked();
        Map.Entry<Long, Vma> e = mm.vmas.floorEntry(Math.max(0, start - 1));
        if (e == null) {
            e = mm.vmas.ceilingEntry(start);
        }
        while (e != null && e.getKey() <= end) {
            Map.Entry<Long, Vma> next = mm.vmas.higherEntry(e.getKey());
            Vma a = e.getValue();
            if (next != null && a.canMerge(next.getValue())) {
                mm.vmas.remove(next.getKey());
                mm.vmas.put(a.start(), a.mergedWith(next.getValue()));
                e = mm.vmas.floorEntry(a.start());
            } else {
                e = next;
            }
        }
    }

    // ---------------------------------------------------------------------------------- munmap & co

    /**
     * @see AddressSpace#munmap
     * @see "do_vmi_munmap() in mm/mmap.c"
     */
    static void munmap(AddressSpace mm, long addr, long length) {
        long len = checkRange(addr, length, PAGE_SIZE, "munmap");
        long stamp = mm.mmapLock.writeLock();
        try {
            mm.alive();
            List<Vma> in = vmasIn(mm, addr, addr + len);
            if (in.isEmpty()) {
                throw new KernelException(Errno.EINVAL, String.format("munmap: nothing is mapped in 0x%x-0x%x", addr, addr + len));
            }
            checkHugeSplit(in, addr, addr + len, "munmap");
            mm.invalidate(addr, addr + len, MmuNotifierEvent.UNMAP, () -> {
                for (Vma v : in) {
                    Memory.zapPageRange(mm, v);
                }
                splitReplace(mm, addr, addr + len, v -> null);
            });
            // a file stays open while any VMA (a split part, say) still maps it
            for (Vma v : in) {
                if (v.file() != null && mm.vmas.values().stream().noneMatch(o -> o.file() == v.file())) {
                    v.file().close();
                }
            }
        } finally {
            mm.mmapLock.unlockWrite(stamp);
        }
    }

    /**
     * @see AddressSpace#mprotect
     * @see "do_mprotect_pkey() in mm/mprotect.c"
     */
    static void mprotect(AddressSpace mm, long addr, long length, int prot) {
        checkProt(prot);
        onMappedRange(mm, addr, length, "mprotect", (start, end) -> {
            checkHugeSplit(vmasIn(mm, start, end), start, end, "mprotect");
            mm.invalidate(start, end, MmuNotifierEvent.PROTECTION_VMA, () -> {
                for (Vma v : vmasIn(mm, start, end)) {
                    mm.pt.forEachEntry(v.start(), v.end(), (va, e) -> {
                        if ((e & (PageTable.PRESENT | PageTable.PROTNONE)) == 0) {
                            return;
                        }
                        long ne = e & ~(PageTable.WRITE | PageTable.PRESENT | PageTable.PROTNONE);
                        ne |= prot == Vma.PROT_NONE ? PageTable.PROTNONE : PageTable.PRESENT;
                        // write permission comes back at the next write fault, with the dirty bit
                        mm.pt.setEntry(va, e, ne);
                    });
                }
                splitReplace(mm, start, end, v -> v.withProt(prot));
            });
            return 0;
        });
    }

    @FunctionalInterface
    interface RangeOp {
        long apply(long start, long end);
    }

    /**
     * The frame of mprotect, madvise, migrate and msync: checks the range, takes the mmap write
     * lock, requires [addr, addr+length) to be wholly mapped (ENOMEM otherwise, as Linux) and runs
     * {@code op} on the page-rounded range.
     */
    static long onMappedRange(AddressSpace mm, long addr, long length, String what, RangeOp op) {
        long len = checkRange(addr, length, PAGE_SIZE, what);
        long stamp = mm.mmapLock.writeLock();
        try {
            mm.alive();
            requireMapped(mm, addr, addr + len, what);
            return op.apply(addr, addr + len);
        } finally {
            mm.mmapLock.unlockWrite(stamp);
        }
    }

    private static void requireMapped(AddressSpace mm, long start, long end, String what) {
        long cur = start;
        for (Vma v : vmasIn(mm, start, end)) {
            if (v.start() > cur) {
                break;
            }
            cur = v.end();
        }
        if (cur < end) {
            throw new KernelException(Errno.ENOMEM, String.format("%s: 0x%x-0x%x is not mapped", what, cur, end));
        }
    }

    /**
     * Tears the address space down at exit: notifiers see RELEASE over the whole space, then
     * every mapping goes and the address space is dead. Returns false, changing nothing, if it
     * already was.
     *
     * @see "exit_mmap() in mm/mmap.c"
     */
    static boolean exitMmap(AddressSpace mm) {
        long stamp = mm.mmapLock.writeLock();
        try {
            if (mm.dead) {
                return false;
            }
            mm.invalidate(0, PageTable.TASK_SIZE, MmuNotifierEvent.RELEASE, () -> {
                for (Vma v : new ArrayList<>(mm.vmas.values())) {
                    Memory.zapPageRange(mm, v);
                    if (v.file() != null) {
                        v.file().close(); // closing twice (split VMAs) is harmless
                    }
                }
                mm.vmas.clear();
            });
            mm.dead = true;
            return true;
        } finally {
            mm.mmapLock.unlockWrite(stamp);
        }
    }
}
