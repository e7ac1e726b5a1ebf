package org.peerdirect.doca.syncevent;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * The bytes {@code doca_sync_event_export_to_remote_net} gives and
 * {@code doca_sync_event_remote_net_create_from_export} takes: where the counter is and the key a
 * remote peer's RDMA atomics and writes name. DOCA's format is not public; this one is ours
 * [model], little-endian, 48 bytes:
 *
 * <pre>
 *  0 u32 magic "DSEV"   4 u16 version (1)   6 u16 reserved   8 u32 rkey   12 u32 pid of the owner
 * 16 u64 counter address                    24 u64 node GUID of the subscriber's device
 * 32 u64 event id                           40 u64 reserved, zero
 * </pre>
 */
public record SyncEventExportDesc(int rkey, int pid, long addr, long nodeGuid, long eventId) {

    public static final int SIZE = 48;
    public static final int MAGIC = 0x56455344; // "DSEV" read little-endian
    public static final int VERSION = 1;

    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    public byte[] toBytes() {
        byte[] b = new byte[SIZE];
        MemorySegment s = MemorySegment.ofArray(b);
        s.set(U32, 0, MAGIC);
        s.set(U16, 4, (short) VERSION);
        s.set(U32, 8, rkey);
        s.set(U32, 12, pid);
        s.set(U64, 16, addr);
        s.set(U64, 24, nodeGuid);
        s.set(U64, 32, eventId);
        return b;
    }

    /** Reads a descriptor; DOCA_ERROR_INVALID_VALUE naming what is wrong (null, length, magic, version, alignment). */
    public static SyncEventExportDesc parse(byte[] d) {
        String w = "doca_sync_event_remote_net_create_from_export";
        DocaException.check(d != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null export data");
        DocaException.check(d.length == SIZE, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": " + d.length + " bytes; an export is " + SIZE);
        MemorySegment s = MemorySegment.ofArray(d);
        DocaException.check(s.get(U32, 0) == MAGIC, DocaError.DOCA_ERROR_INVALID_VALUE,
                String.format("%s: not a sync event export (magic 0x%08x)", w, s.get(U32, 0)));
        DocaException.check(s.get(U16, 4) == VERSION, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": version " + s.get(U16, 4) + ", this library reads " + VERSION);
        long addr = s.get(U64, 16);
        DocaException.check((addr & 7) == 0, DocaError.DOCA_ERROR_INVALID_VALUE, String.format("%s: counter address 0x%x not 8-byte aligned", w, addr));
        return new SyncEventExportDesc(s.get(U32, 8), s.get(U32, 12), addr, s.get(U64, 24), s.get(U64, 32));
    }
}
