package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.ToLongFunction;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.RecvWqe;
import org.peerdirect.kernel.dma.DmaPort;

/**
 * What the data-path objects share (the CQ, QP, SRQ and mkey tables and the queues in memory):
 * the transport engine they stand in front of, the function's DMA port, the counters of WQEs the
 * device could not parse and of DMA the IOMMU stopped, and the byte-level helpers more than one
 * of them uses (page lists, receive data segments).
 *
 * <p>Lock rules: immutable but for the atomic counters.
 */
final class DataPath {

    final HcaDevice engine;
    final DmaPort port;
    /** Send WQEs the device could not parse (completed with an error CQE). */
    final AtomicLong badWqes = new AtomicLong();
    /**
     * Send doorbells whose producer index names more WQEs than the ring holds (an index behind the
     * one fetched: two posters ringing one queue out of order, or garbage): ignored, nothing fetched.
     */
    final AtomicLong badDoorbells = new AtomicLong();
    /** Descriptor or doorbell-record reads and writes the IOMMU stopped. */
    final AtomicLong dmaFaults = new AtomicLong();

    DataPath(HcaDevice engine, DmaPort port) {
        this.engine = engine;
        this.port = port;
    }

    /** A command's page list: {@code n} 8-byte bus addresses at {@code at}, each 4 KiB aligned. */
    static long[] pas(MemorySegment in, long at, int n, String what) throws Refused {
        long[] pas = new long[n];
        for (int i = 0; i < n; i++) {
            pas[i] = in.get(BE64, at + 8L * i);
            if ((pas[i] & 0xfff) != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_PAGE, String.format("%s pas[%d] 0x%x is not 4 KiB aligned", what, i, pas[i]));
            }
        }
        return pas;
    }

    /** {@code f} summed over the live entries of {@code table}. */
    static <T> long sum(AtomicReferenceArray<T> table, ToLongFunction<T> f) {
        long n = 0;
        for (int i = 0; i < table.length(); i++) {
            T t = table.get(i);
            n += t == null ? 0 : f.applyAsLong(t);
        }
        return n;
    }

    /**
     * A receive WQE's data segments from byte {@code from} to {@code end} of {@code wqe} into the
     * engine's slot, up to the first INVALID_LKEY (the list's end) or the slot's capacity.
     */
    static void dataSegments(MemorySegment wqe, int from, int end, RecvWqe w) {
        w.numSge = 0;
        for (int o = from; o + Qp.DS_SIZE <= end && w.numSge < w.addr.length; o += Qp.DS_SIZE) {
            int lkey = wqe.get(BE32, o + Qp.DATA_LKEY);
            if (lkey == Qp.INVALID_LKEY) {
                break;
            }
            w.byteCount[w.numSge] = wqe.get(BE32, o + Qp.DATA_BYTE_COUNT);
            w.lkey[w.numSge] = lkey;
            w.addr[w.numSge] = wqe.get(BE64, o + Qp.DATA_ADDR);
            w.numSge++;
        }
    }
}
