package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.dma.DmaPort;

/**
 * DevX umems ({@code CREATE_UMEM}, {@code DESTROY_UMEM}; the driver side is {@code devx.c}'s
 * {@code devx_umem_reg_cmd_build} over pinned process memory): a list of 4 KiB pages of the
 * function's IOMMU domain, like a {@code pas} list, that CQs, QPs and mkeys take their rings,
 * doorbell records and pages from ({@link Umem#region}). A umem in use by one of them cannot be
 * destroyed ({@code BAD_RES_STATE}).
 *
 * <p>Lock rules: the firmware thread alone.
 */
final class Umems {

    /**
     * A umem: {@code bytes} bytes starting {@code pageOffset} into the first of {@code pages}.
     * {@link #users} counts the queues and mkeys in it (firmware thread).
     */
    final class Umem {
        final int id;
        final long[] pages;
        final int pageOffset;
        final long bytes;
        final boolean writable;
        /** The space the pages are addresses of: null for the function's IOMMU domain, else a DUMEM's DPA memory. */
        final DmaPort space;
        /** A DUMEM's DPA memory as the NIC polls doorbell records in it ({@link #record}); null for a DevX umem. */
        final DmaPort recordSpace;
        /** A DUMEM: what it is the memory of (DPA_MEM or DPA_PROCESS and its id), for refusals; null for a DevX umem. */
        final String dumemOf;
        int users;

        Umem(int id, long[] pages, int pageOffset, long bytes, boolean writable) {
            this(id, pages, pageOffset, bytes, writable, null, null, null);
        }

        Umem(int id, long[] pages, int pageOffset, long bytes, boolean writable, DmaPort space, DmaPort recordSpace, String dumemOf) {
            this.space = space;
            this.recordSpace = recordSpace;
            this.dumemOf = dumemOf;
            this.id = id;
            this.pages = pages;
            this.pageOffset = pageOffset;
            this.bytes = bytes;
            this.writable = writable;
        }

        /** The IOVA of byte {@code offset} of the umem. */
        long address(long offset) {
            long at = pageOffset + offset;
            return pages[(int) (at >>> 12)] + (at & 0xfff);
        }

        /**
         * {@code bytes} at {@code offset} of this umem as a queue's memory ({@code what} names the
         * queue in a refusal), held until {@link QueueMemory#release}; the device writes there, so
         * the umem must be writable.
         */
        QueueMemory region(long offset, long bytes, String what) throws Refused {
            return region(offset, bytes, what, space);
        }

        /**
         * A doorbell record of {@code bytes} at {@code offset} ({@link #region}): in a DUMEM, the
         * NIC polls it whenever it needs the count, so a value the DPA thread has not yet written
         * back is simply the old one (the memory model's C1 applies to what a doorbell makes the
         * NIC read, not to this polling).
         */
        QueueMemory record(long offset, long bytes, String what) throws Refused {
            return region(offset, bytes, what, recordSpace);
        }

        private QueueMemory region(long offset, long bytes, String what, DmaPort in) throws Refused {
            if (offset < 0 || bytes < 0 || offset > this.bytes || bytes > this.bytes - offset) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, String.format(
                        "umem %d holds %d bytes: %s needs %d bytes at offset %d", id, this.bytes, what, bytes, offset));
            }
            if (!writable) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, "umem " + id + " is not writable (wr_en clear): " + what
                        + " is written by the device");
            }
            users++;
            Umem u = this;
            return new QueueMemory() {
                private boolean released;

                @Override
                public DmaPort port() {
                    return in != null ? in : port;
                }

                @Override
                public DmaPort space() {
                    return u.space;
                }

                @Override
                public long address(long o) {
                    return u.address(offset + o);
                }

                @Override
                public long bytes() {
                    return bytes;
                }

                @Override
                public void release() {
                    if (!released) {
                        released = true;
                        users--;
                    }
                }
            };
        }
    }

    private final DmaPort port;
    private final Caps caps;
    private final Uctxs uctxs;
    private final Map<Integer, Umem> umems = new HashMap<>();
    /**
     * DUMEMs: the DPA memory of a DPA_MEM object or of a DPA process's heap, named by a umem id
     * (peerdirect PRM extension v1, {@link org.peerdirect.hca.cx4.ifc.DpaObj#DUMEM}); made and
     * destroyed with their DPA object, never by CREATE/DESTROY_UMEM, not counted as umems.
     */
    private final Map<Integer, Umem> dumems = new HashMap<>();
    private int nextId = 1;

    Umems(DmaPort port, Caps caps, Uctxs uctxs) {
        this.port = port;
        this.caps = caps;
        this.uctxs = uctxs;
    }

    void register(CommandTable t) {
        if (!caps.devx()) {
            return;
        }
        t.add(Mlx5Cmd.CREATE_UMEM, CommandTable.withList(Devx.UMEM_MTT, Umems::mtts), CommandTable.MIN_OUTPUT, false, (opMod, in, out) -> create(in, out));
        t.add(Mlx5Cmd.DESTROY_UMEM, (opMod, in, out) -> destroy(Devx.UMEM_ID.get(in, 0)));
    }

    /** The MTT entries of a {@code CREATE_UMEM} (bounded: the list must still fit a command). */
    static int mtts(MemorySegment in) {
        return (int) Math.min(1 << 20, Math.max(0, in.get(BE64, Devx.UMEM_NUM_OF_MTT)));
    }

    int count() {
        return umems.size();
    }

    /** Teardown: every umem forgotten (the queues using them went first). */
    void clear() {
        umems.clear();
        dumems.clear();
    }

    private int nextId() {
        int id = nextId;
        while (id == 0 || umems.containsKey(id) || dumems.containsKey(id)) {
            id = id + 1 & 0xff_ffff;
        }
        nextId = id + 1 & 0xff_ffff;
        return id;
    }

    /**
     * A DUMEM over {@code bytes} of DPA memory at DPA address {@code daddr} in {@code space}, owned
     * by the command's uid ({@code what}: the DPA object it belongs to); its umem id. Mkeys, CQs and
     * QPs name it as they name a umem ({@code *_umem_id}); offsets count from {@code daddr}.
     */
    int addDumem(DmaPort space, DmaPort recordSpace, long daddr, long bytes, String what) {
        long first = daddr & ~0xfffL;
        long[] pages = new long[(int) (((daddr & 0xfff) + bytes + 4095) >>> 12)];
        for (int i = 0; i < pages.length; i++) {
            pages[i] = first + 4096L * i;
        }
        int id = nextId();
        dumems.put(id, new Umem(id, pages, (int) (daddr & 0xfff), bytes, true, space, recordSpace, what));
        uctxs.own(Uctxs.Kind.UMEM, id);
        return id;
    }

    /** Before its DPA object goes: refused while an mkey or a queue holds part of DUMEM {@code id}. */
    void checkDumemFree(int id) throws Refused {
        Umem u = dumems.get(id);
        if (u != null && u.users > 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE, u.dumemOf + ": its DUMEM " + id + " holds " + u.users
                    + " rings, doorbell records or mkeys: destroy their queues and mkeys first");
        }
    }

    /** Its DPA object went ({@link #checkDumemFree} passed). */
    void removeDumem(int id) {
        if (dumems.remove(id) != null) {
            uctxs.release(Uctxs.Kind.UMEM, id);
        }
    }

    /** The live umem {@code id}, checked against the command's uid; {@code what} names who asks in a refusal. */
    Umem umem(int id, String what) throws Refused {
        Umem u = umems.containsKey(id) ? umems.get(id) : dumems.get(id);
        if (u == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, what + ": umem " + id + " does not exist");
        }
        uctxs.checkUse(Uctxs.Kind.UMEM, id, what + ": umem " + id);
        return u;
    }

    private void create(MemorySegment in, MemorySegment out) throws Refused {
        if (umems.size() >= 1 << caps.cur(HcaCap.LOG_MAX_UMEM)) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, Syndromes.SYND_LIMIT, "all " + (1 << caps.cur(HcaCap.LOG_MAX_UMEM)) + " umems are in use");
        }
        if (Devx.UMEM_LOG_PAGE_SIZE.get(in, 0) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, "log_page_size " + Devx.UMEM_LOG_PAGE_SIZE.get(in, 0)
                    + ": the model takes umems in 4 KiB pages (0)");
        }
        int n = mtts(in);
        long pageOffset = in.get(BE32, Devx.UMEM_PAGE_OFFSET) & 0xffff_ffffL;
        if (n == 0 || pageOffset >= 4096) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, "a umem of " + n + " pages at page_offset " + pageOffset
                    + ": at least one page, the offset within it");
        }
        long[] pages = new long[n];
        boolean writable = true;
        for (int i = 0; i < n; i++) {
            long e = in.get(BE64, Devx.UMEM_MTT + 8L * i);
            if ((e & Mkey.MTT_READ) == 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, "umem MTT entry " + i + " is not present (rd_en clear)");
            }
            writable &= (e & Mkey.MTT_WRITE) != 0;
            pages[i] = e & ~0xfffL;
        }
        int id = nextId();
        umems.put(id, new Umem(id, pages, (int) pageOffset, 4096L * n - pageOffset, writable));
        uctxs.own(Uctxs.Kind.UMEM, id);
        Devx.UMEM_ID.set(out, 0, id);
    }

    private void destroy(int id) throws Refused {
        Umem u = umem(id, "DESTROY_UMEM");
        if (u.dumemOf != null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, "umem " + id + " is the DUMEM of " + u.dumemOf
                    + ": it goes with its object");
        }
        uctxs.check(Uctxs.Kind.UMEM, id, "umem " + id);
        if (u.users > 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE, "umem " + id + " holds " + u.users
                    + " rings, doorbell records or mkeys: destroy their queues and mkeys first");
        }
        umems.remove(id);
        uctxs.release(Uctxs.Kind.UMEM, id);
    }
}
