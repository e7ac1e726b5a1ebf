package org.peerdirect.mlx4.core;

import static org.peerdirect.hca.cx3.ifc.Be.BE64;

import java.util.BitSet;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * MTT ranges ({@code mr.c}: {@code mlx4_mtt_init}, {@code mlx4_write_mtt}, {@code mlx4_mtt_cleanup}):
 * contiguous runs of MTT entries from the table's allocator, their ICM mapped on demand, filled by
 * {@code WRITE_MTT}. A context names a range by {@link Range#addr()}.
 *
 * <p>Lock rules: {@code this} guards the allocator.
 */
public final class Mtt {

    /** {@code struct mlx4_mtt}: first entry and count. */
    public record Range(long offset, int n) {
        /** {@code mlx4_mtt_addr}: the byte address of the first entry in the MTT table. */
        public long addr() {
            return offset * org.peerdirect.hca.cx3.ifc.Mtt.ENTRY_SIZE;
        }
    }

    private final String name;
    private final Icm icm;
    private final BitSet used = new BitSet();
    private final int reserved;
    private final int total;

    public Mtt(String name, Icm icm, int reserved, int total) {
        this.name = name;
        this.icm = icm;
        this.reserved = reserved;
        this.total = total;
    }

    /** {@code mlx4_mtt_init}: {@code n} entries, their ICM mapped. */
    public Range alloc(int n) {
        int at;
        synchronized (this) {
            at = reserved;
            for (;;) {
                at = used.nextClearBit(at);
                int end = used.nextSetBit(at);
                if (end < 0 || end - at >= n) {
                    break;
                }
                at = end;
            }
            if (n < 1 || at + n > total) {
                throw new KernelException(Errno.ENOMEM, name + ": no run of " + n + " free MTT entries (" + total + " in the table)");
            }
            used.set(at, at + n);
        }
        Range r = new Range(at, n);
        try {
            icm.get(at, at + n - 1);
        } catch (RuntimeException e) {
            synchronized (this) {
                used.clear(at, at + n);
            }
            throw e;
        }
        return r;
    }

    /**
     * {@code mlx4_write_mtt} as a function that owns its ICM does it ({@code mlx4_write_mtt_chunk}):
     * the entries from {@code start} of the range, each a page's bus address | present, stored
     * by the CPU into the ICM pages the device reads them from. ({@code WRITE_MTT} is the
     * multi-function path; the device takes it too.)
     */
    public void write(Range r, int start, long[] pages) {
        if (start < 0 || start + pages.length > r.n()) {
            throw new KernelException(Errno.EINVAL, name + ": " + pages.length + " MTT entries from " + start + " overflow a range of " + r.n());
        }
        for (int i = 0; i < pages.length; i++) {
            icm.find(r.offset() + start + i).set(BE64, 0, pages[i] | org.peerdirect.hca.cx3.ifc.Mtt.PRESENT);
        }
        java.lang.invoke.VarHandle.releaseFence(); // dma_sync_single_for_device: visible before the command naming them
    }

    /** {@code mlx4_mtt_cleanup}. */
    public void free(Range r) {
        if (r == null) {
            return;
        }
        icm.put(r.offset(), r.offset() + r.n() - 1);
        synchronized (this) {
            used.clear((int) r.offset(), (int) r.offset() + r.n());
        }
    }
}
