package org.peerdirect.doca.mmap;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * The bytes {@code doca_mmap_export_pci} and {@code doca_mmap_export_rdma} give and
 * {@code doca_mmap_create_from_export} takes: what a peer needs to reach the range. DOCA's own
 * format is not public; this one is ours [model], little-endian, 64 bytes:
 *
 * <pre>
 *  0 u32 magic "DMAP"      4 u16 version (1)     6 u16 kind (1 PCI, 2 RDMA)
 *  8 u32 permissions (doca_access_flag mask)     12 u32 key (PCI: the lkey; RDMA: the rkey)
 * 16 u64 address           24 u64 length
 * 32 u64 node GUID of the exporting device       40 u64 export id (the exporting mmap's)
 * 48 u32 pid of the exporting process            52..63 reserved, zero
 * </pre>
 */
public record MmapExportDesc(int kind, int permissions, int key, long addr, long len, long nodeGuid, long exportId, int pid) {

    public static final int SIZE = 64;
    public static final int MAGIC = 0x50414d44; // "DMAP" read little-endian
    public static final int VERSION = 1;
    public static final int KIND_PCI = 1;
    public static final int KIND_RDMA = 2;

    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The descriptor's bytes. */
    public byte[] toBytes() {
        byte[] b = new byte[SIZE];
        MemorySegment s = MemorySegment.ofArray(b);
        s.set(U32, 0, MAGIC);
        s.set(U16, 4, (short) VERSION);
        s.set(U16, 6, (short) kind);
        s.set(U32, 8, permissions);
        s.set(U32, 12, key);
        s.set(U64, 16, addr);
        s.set(U64, 24, len);
        s.set(U64, 32, nodeGuid);
        s.set(U64, 40, exportId);
        s.set(U32, 48, pid);
        return b;
    }

    /**
     * Reads a descriptor.
     *
     * @throws DocaException DOCA_ERROR_INVALID_VALUE naming what is wrong: null, length, magic,
     *         version, kind, a zero length or a range that wraps
     */
    public static MmapExportDesc parse(byte[] desc) {
        String w = "doca_mmap_create_from_export";
        DocaException.check(desc != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null export descriptor");
        DocaException.check(desc.length == SIZE, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": export descriptor of " + desc.length + " bytes; an export is " + SIZE);
        MemorySegment s = MemorySegment.ofArray(desc);
        DocaException.check(s.get(U32, 0) == MAGIC, DocaError.DOCA_ERROR_INVALID_VALUE,
                String.format("%s: not an mmap export descriptor (magic 0x%08x)", w, s.get(U32, 0)));
        DocaException.check(s.get(U16, 4) == VERSION, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": descriptor version " + s.get(U16, 4)
                + ", this library reads " + VERSION);
        int kind = s.get(U16, 6);
        DocaException.check(kind == KIND_PCI || kind == KIND_RDMA, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": unknown export kind " + kind);
        long addr = s.get(U64, 16);
        long len = s.get(U64, 24);
        DocaException.check(len > 0 && Long.compareUnsigned(addr + len - 1, addr) >= 0,
                DocaError.DOCA_ERROR_INVALID_VALUE, String.format("%s: bad range [0x%x, +%d)", w, addr, len));
        return new MmapExportDesc(kind, s.get(U32, 8), s.get(U32, 12), addr, len, s.get(U64, 32), s.get(U64, 40), s.get(U32, 48));
    }
}
