package org.peerdirect.kernel.mm;

import java.lang.foreign.MemorySegment;

/**
 * {@code struct vm_area_struct}: [start, end) with protections and kind. Immutable: mprotect and
 * partial munmap replace VMAs with split copies.
 *
 * @param device for {@link Kind#DEVICE} mappings, the device memory the range shows (a GPU BAR
 *               window); CPU access goes there, pinning and HMM refuse it ({@code VM_IO|VM_PFNMAP})
 * @param file   for {@link Kind#FILE} mappings, the file whose pages the range shows
 * @param offset byte offset of {@code start} in the device memory or the file ({@code vm_pgoff} in bytes)
 */
public record Vma(long start, long end, int prot, Kind kind, String name, MemorySegment device, MappedFile file,
        long offset) {

    public static final int PROT_NONE = 0;
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;

    /** What backs the mapping. */
    public enum Kind {
        /** anonymous private memory, 4 KiB pages. */
        ANON,
        /** anonymous memory in 2 MiB huge pages (MAP_HUGETLB). */
        HUGETLB,
        /** a shared mapping of a real file (MAP_SHARED): faults read it, writeback writes it. */
        FILE,
        /** device / I/O memory (VM_IO | VM_PFNMAP): no struct pages to pin. */
        DEVICE
    }

    public long length() {
        return end - start;
    }

    public boolean readable() {
        return (prot & PROT_READ) != 0;
    }

    public boolean writable() {
        return (prot & PROT_WRITE) != 0;
    }

    /** Offset in the backing device memory or file of the byte at va. */
    long offsetOf(long va) {
        return offset + (va - start);
    }

    Vma slice(long s, long e) {
        return new Vma(s, e, prot, kind, name, device, file, offset + (s - start));
    }

    Vma withProt(int p) {
        return new Vma(start, end, p, kind, name, device, file, offset);
    }

    /** {@code vma_merge}'s test: touching, same attributes, and contiguous in what backs them. */
    boolean canMerge(Vma b) {
        return end == b.start && prot == b.prot && kind == b.kind && java.util.Objects.equals(name, b.name)
                && device == b.device && file == b.file && offset + length() == b.offset;
    }

    Vma mergedWith(Vma b) {
        return new Vma(start, b.end, prot, kind, name, device, file, offset);
    }

    /** One line of /proc/pid/maps. */
    public String mapsLine() {
        return String.format("%012x-%012x %s%s%s %08x 00:00 0 %s", start, end, readable() ? "r" : "-",
                writable() ? "w" : "-", kind == Kind.FILE ? "-s" : "-p", offset, name == null ? "" : name);
    }
}
