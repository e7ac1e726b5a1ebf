package org.peerdirect.kernel.mm;

import java.lang.foreign.MemorySegment;

/**
 * {@code struct vm_area_struct}: [start, end) with protections and kind. Immutable: mprotect and
 * partial munmap replace VMAs with split copies.
 *
 * @param device for {@link Kind#DEVICE} mappings, the device memory the range shows (a GPU BAR
 *               window); CPU access goes there, pinning and HMM refuse it ({@code VM_IO|VM_PFNMAP})
 */
public record Vma(long start, long end, int prot, Kind kind, String name, MemorySegment device, long deviceOffset) {

    public static final int PROT_NONE = 0;
    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;

    /** What backs the mapping. */
    public enum Kind {
        /** anonymous private memory, 4 KiB pages. */
        ANON,
        /** anonymous memory in 2 MiB huge pages (MAP_HUGETLB). */
        HUGETLB,
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

    Vma slice(long s, long e) {
        return new Vma(s, e, prot, kind, name, device, deviceOffset + (s - start));
    }

    Vma withProt(int p) {
        return new Vma(start, end, p, kind, name, device, deviceOffset);
    }

    /** One line of /proc/pid/maps. */
    public String mapsLine() {
        return String.format("%012x-%012x %s%s-p %08x 00:00 0 %s", start, end, readable() ? "r" : "-",
                writable() ? "w" : "-", deviceOffset, name == null ? "" : name);
    }
}
