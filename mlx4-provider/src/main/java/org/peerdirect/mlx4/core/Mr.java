package org.peerdirect.mlx4.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;

import java.lang.foreign.MemorySegment;
import java.util.BitSet;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.MptEntry;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * Memory regions ({@code mr.c}): the MPT index allocator with its rotating key byte
 * ({@code mlx4_mpt_reserve}, {@code hw_index_to_key}), {@code mlx4_mr_enable} ({@code SW2HW_MPT}
 * with the entry in a mailbox and the MTT already written) and {@code mlx4_mr_free}'s
 * {@code HW2SW_MPT}.
 *
 * <p>Lock rules: {@code this} guards the allocator.
 */
public final class Mr {

    /** An enabled region: its MPT index, key and MTT. */
    public record Region(int index, int key, Mtt.Range mtt) {
    }

    private final Mlx4Dev dev;
    private final BitSet used = new BitSet();
    private final byte[] keyByte;
    private final int reserved;
    private final int max;

    Mr(Mlx4Dev dev, int reserved, int max) {
        this.dev = dev;
        this.reserved = reserved;
        this.max = max;
        this.keyByte = new byte[max];
    }

    /** {@code mlx4_mpt_reserve}: an index and a key whose byte differs from the index's last use. */
    private synchronized int[] reserve() {
        int i = used.nextClearBit(reserved);
        if (i >= max) {
            throw new KernelException(Errno.ENOMEM, dev.name + ": out of MPT entries (" + (max - reserved) + " in use)");
        }
        used.set(i);
        int kb = ++keyByte[i] & 0xff;
        return new int[] {i, i << 8 | kb};
    }

    private synchronized void release(int index) {
        used.clear(index);
    }

    /**
     * {@code mlx4_mr_alloc} + {@code mlx4_write_mtt} + {@code mlx4_mr_enable}: a region of
     * {@code pages} (4 KiB bus addresses, the first holding {@code start}) with the
     * {@code MLX4_PERM_*} rights in {@code perm}.
     */
    public Region enable(int pdn, long start, long length, int perm, long[] pages) {
        int[] ik = reserve();
        Mtt.Range mtt = null;
        DmaCoherentPages.Page box = null;
        try {
            mtt = dev.mtt.alloc(pages.length);
            dev.mtt.write(mtt, 0, pages);
            box = dev.dma.alloc();
            MemorySegment e = box.mem();
            e.set(BE32, MptEntry.FLAGS, MptEntry.FLAG_MIO | MptEntry.FLAG_REGION | perm & MptEntry.PERM_MASK);
            e.set(BE32, MptEntry.KEY, MptEntry.keyToHwIndex(ik[1]));
            e.set(BE32, MptEntry.PD_FLAGS, pdn & 0xff_ffff);
            e.set(BE64, MptEntry.START, start);
            e.set(BE64, MptEntry.LENGTH, length);
            e.set(BE32, MptEntry.LKEY, ik[1]);
            e.set(BE64, MptEntry.MTT_ADDR, mtt.addr());
            e.set(BE32, MptEntry.ENTITY_SIZE, 12);
            e.set(BE32, MptEntry.FIRST_BYTE_OFFSET, (int) (start & 0xfff));
            dev.cmd.box(box.iova(), 0, ik[0], 0, Mlx4Cmd.SW2HW_MPT);
            return new Region(ik[0], ik[1], mtt);
        } catch (RuntimeException x) {
            dev.mtt.free(mtt);
            release(ik[0]);
            throw x;
        } finally {
            dev.dma.free(box);
        }
    }

    /** {@code HW2SW_MPT} (no output mailbox): returns once the device stopped every access through the key. */
    public void disable(Region r) {
        dev.cmd.cmd(0, r.index(), 1, Mlx4Cmd.HW2SW_MPT);
    }

    /** The region's MTT and index go back (after {@link #disable}, or with the device gone). */
    public void free(Region r) {
        dev.mtt.free(r.mtt());
        release(r.index());
    }
}
