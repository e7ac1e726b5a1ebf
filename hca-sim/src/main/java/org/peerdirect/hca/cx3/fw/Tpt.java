package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Map;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.MptEntry;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;

/**
 * The translation and protection table's commands ({@code mr.c} from the device's side):
 * {@code SW2HW_MPT} reads the MPT entry from the mailbox and its MTT from ICM and makes the key
 * valid in the engine; {@code HW2SW_MPT} returns it to software (the key stops working; the
 * command completes when no DMA through it is in flight); {@code QUERY_MPT}.
 *
 * <p>Lock rules: the firmware thread alone (commands, under the device's firmware lock).
 */
final class Tpt {

    /** The largest region one MPT may describe here (log2 bytes, QUERY_DEV_CAP's MAX_MRW_SZ). */
    static final int LOG_MAX_MRW = 40;

    private final Firmware fw;
    /** index → the entry as SW2HW_MPT gave it (QUERY_MPT), null in software ownership. */
    private final Map<Integer, MemorySegment> entries = new java.util.HashMap<>();

    Tpt(Firmware fw) {
        this.fw = fw;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        table.put(Mlx4Cmd.SW2HW_MPT, this::sw2hwMpt);
        table.put(Mlx4Cmd.HW2SW_MPT, this::hw2swMpt);
        table.put(Mlx4Cmd.QUERY_MPT, this::queryMpt);
    }

    private int index(Firmware.Cmd c) throws Refused {
        int i = c.inMod();
        if (i <= 0 || i >= HcaDevice.MAX_MPT) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "MPT index " + i + " (1.." + (HcaDevice.MAX_MPT - 1) + ")");
        }
        return i;
    }

    static Refused refused(HwCommandException e) {
        return new Refused(e.status(), e.getMessage());
    }

    /**
     * The MTT's 4 KiB entries as the translation the engine walks: entries whose bus addresses
     * follow on make one block ({@code {iovas, lengths}}), as the adapter's MTT cache serves a
     * DMA-contiguous run (what {@code dma_map_sg} gave) in one access. Same translation, page for
     * page; without it a 64 KiB transfer over one IOVA run cost 16 IOMMU accesses (RDMA WRITE of
     * 64 KiB on mlx4 took 1.9x its time before the MTT moved into ICM: {@code bench/ab.sh}).
     */
    static long[][] coalesce(long[] mtt) {
        long[] iova = new long[mtt.length];
        long[] len = new long[mtt.length];
        int n = 0;
        for (long a : mtt) {
            if (n > 0 && iova[n - 1] + len[n - 1] == a) {
                len[n - 1] += 4096;
            } else {
                iova[n] = a;
                len[n++] = 4096;
            }
        }
        return new long[][] {Arrays.copyOf(iova, n), Arrays.copyOf(len, n)};
    }

    /**
     * {@code SW2HW_MPT}: a region ({@code REGION} set, not {@code PHYSICAL}) of 4 KiB pages whose
     * MTT covers it from the page of {@code start}; the key's index must be the modifier's.
     */
    private long sw2hwMpt(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int index = index(c);
        MemorySegment e = fw.inbox(c, MptEntry.SIZE);
        int flags = e.get(BE32, MptEntry.FLAGS);
        int key = MptEntry.hwIndexToKey(e.get(BE32, MptEntry.KEY));
        long start = e.get(BE64, MptEntry.START);
        long length = e.get(BE64, MptEntry.LENGTH);
        int shift = e.get(BE32, MptEntry.ENTITY_SIZE);
        if ((flags & MptEntry.FLAG_SW_OWNS) != 0 || (flags & MptEntry.FLAG_REGION) == 0 || (flags & MptEntry.FLAG_PHYSICAL) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("MPT flags 0x%x: only an MTT-translated region in hardware ownership", flags));
        }
        if (key >>> 8 != index) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("MPT %d: key 0x%x names index %d", index, key, key >>> 8));
        }
        if (shift != 12) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "MPT page size 2^" + shift + " (the model takes 4 KiB pages)");
        }
        if (length <= 0 || length > 1L << LOG_MAX_MRW || start + length < start) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SEG_PARAM, String.format("MPT region of %d bytes at 0x%x", length, start));
        }
        int pages = (int) (((start & 0xfff) + length + 0xfff) >>> 12);
        long[][] blocks = coalesce(fw.icm.readMtt(e.get(BE64, MptEntry.MTT_ADDR), pages));
        HcaDevice eng = fw.engine();
        try {
            eng.sw2hwMptAt(index, key, e.get(BE32, MptEntry.PD_FLAGS) & 0xff_ffff, start, length, flags & MptEntry.PERM_MASK, blocks[0],
                    blocks[1]);
        } catch (HwCommandException x) {
            throw refused(x);
        }
        entries.put(index, e);
        return 0;
    }

    /** {@code HW2SW_MPT}: the key stops working (DMA through it drained), the entry is software's again. */
    private long hw2swMpt(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        int index = index(c);
        MemorySegment e = entries.remove(index);
        if (e == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "MPT " + index + " is not in hardware ownership");
        }
        int key = MptEntry.hwIndexToKey(e.get(BE32, MptEntry.KEY));
        HcaDevice eng = fw.engine();
        eng.hw2swMpt(key);
        eng.freeMpt(key);
        if (c.outParam() != 0 && c.opMod() == 0) {
            fw.outbox(c, e);
        }
        return 0;
    }

    private long queryMpt(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        MemorySegment e = entries.get(index(c));
        if (e == null) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "MPT " + c.inMod() + " is not in hardware ownership");
        }
        fw.outbox(c, e);
        return 0;
    }

    /** CLOSE_HCA or a reset: the engine dropped its keys; the table forgets them. */
    void clear() {
        entries.clear();
    }

    int count() {
        return entries.size();
    }
}
