package org.peerdirect.mlx5.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One event queue from the driver's side ({@code eq.c}): the ring of EQEs in DMA pages with every
 * owner bit initialised to 1, created by {@code CREATE_EQ} with its page list, armed through the
 * driver's UAR, polled to the end on each interrupt and re-armed.
 *
 * <p>Lock rules: only the interrupt thread of the EQ's vector polls (Linux: one IRQ handler per
 * EQ); the consumer index is confined to it. Counters are atomic for the tools.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/eq.c">eq.c</a>
 */
final class Mlx5Eq {

    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();
    /** {@code MLX5_NUM_SPARE_EQE}: entries above the requested size, so the ring never fills before a re-arm. */
    static final int NUM_SPARE_EQE = 0x80;

    /** What a poll hands on: one EQE's type, subtype and data (valid during the call only). */
    interface Handler {
        void eqe(int type, int subType, MemorySegment data);
    }

    final String kind;
    final int eqn;
    final int logSize;
    final long mask;
    final int vector;
    private final List<DmaCoherentPages.Page> pages;
    private final PciFunction fn;
    private final long doorbell;
    private final AtomicLongArray byType = new AtomicLongArray(64);
    /** Written by the polling (interrupt) thread only; volatile for the tools' reads. */
    private volatile int ci;

    private Mlx5Eq(String kind, int eqn, int logSize, long mask, int vector, List<DmaCoherentPages.Page> pages, PciFunction fn, long doorbell) {
        this.kind = kind;
        this.eqn = eqn;
        this.logSize = logSize;
        this.mask = mask;
        this.vector = vector;
        this.pages = pages;
        this.fn = fn;
        this.doorbell = doorbell;
    }

    /**
     * {@code create_map_eq}: a ring of at least {@code nent + NUM_SPARE_EQE} entries (a power of
     * two), owners set to 1, created on {@code uar} and {@code vector}; not armed yet.
     */
    static Mlx5Eq create(CmdIf cmd, DmaCoherentPages dma, PciFunction fn, String kind, int nent, long mask, int uar, int vector) {
        int logSize = 32 - Integer.numberOfLeadingZeros(nent + NUM_SPARE_EQE - 1);
        int bytes = Eq.EQE_SIZE << logSize;
        int npages = (bytes + 4095) / 4096;
        List<DmaCoherentPages.Page> pages = new ArrayList<>(npages);
        try {
            for (int i = 0; i < npages; i++) {
                DmaCoherentPages.Page p = dma.alloc();
                pages.add(p);
                for (long off = Eq.EQE_OWNER; off < 4096; off += Eq.EQE_SIZE) {
                    p.mem().set(ValueLayout.JAVA_BYTE, off, (byte) Eq.EQE_OWNER_INIT_VAL);
                }
            }
            MemorySegment in = CmdIf.input(Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8 * npages);
            long c = Eq.CREATE_EQ_IN_EQC;
            Eq.EQC_LOG_EQ_SIZE.set(in, c, logSize);
            Eq.EQC_UAR_PAGE.set(in, c, uar);
            Eq.EQC_INTR.set(in, c, vector);
            Eq.EQC_LOG_PAGE_SIZE.set(in, c, 0);
            in.set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, mask);
            for (int i = 0; i < npages; i++) {
                in.set(BE64, Eq.CREATE_EQ_IN_PAS + 8L * i, pages.get(i).iova());
            }
            int eqn = cmd.exec(in, 16).get(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN) & 0xff;
            return new Mlx5Eq(kind, eqn, logSize, mask, vector, pages, fn, (long) uar << 12); // armed by the caller once it can be polled
        } catch (RuntimeException e) {
            pages.forEach(dma::free);
            throw e;
        }
    }

    private MemorySegment entry(int index) {
        long off = (long) (index & (1 << logSize) - 1) * Eq.EQE_SIZE;
        return pages.get((int) (off >>> 12)).mem().asSlice(off & 4095, Eq.EQE_SIZE);
    }

    /** {@code eq_update_ci} with arm. */
    void arm() {
        fn.write32be(0, doorbell + Eq.UAR_EQ_ARM_CI, eqn << 24 | ci & 0xff_ffff);
    }

    /**
     * Consumes every EQE software owns ({@code (owner ^ (ci >> log_size)) & 1 == 0}; the owner is
     * read first, the rest after it), then updates the consumer index and re-arms.
     *
     * @return EQEs consumed
     */
    int poll(Handler h) {
        int n = 0;
        for (;;) {
            MemorySegment e = entry(ci);
            int owner = (byte) BYTE.getVolatile(e, Eq.EQE_OWNER) & 1;
            if ((owner ^ ci >>> logSize & 1) != 0) {
                break;
            }
            int type = e.get(ValueLayout.JAVA_BYTE, Eq.EQE_TYPE) & 0xff;
            byType.incrementAndGet(type & 63);
            h.eqe(type, e.get(ValueLayout.JAVA_BYTE, Eq.EQE_SUB_TYPE) & 0xff, e.asSlice(Eq.EQE_DATA, 28));
            ci++;
            n++;
        }
        arm();
        return n;
    }

    /** {@code DESTROY_EQ}: the firmware posts nothing more to the ring. */
    void destroy(CmdIf cmd) {
        MemorySegment in = CmdIf.input(Mlx5Cmd.DESTROY_EQ, 0, 16);
        in.set(ValueLayout.JAVA_BYTE, Eq.EQN_IN, (byte) eqn);
        cmd.exec(in, 16);
    }

    /** Frees the ring: only once the EQ is destroyed (or the device gone) and no handler can still poll it. */
    void freeRing(DmaCoherentPages dma) {
        pages.forEach(dma::free);
    }

    int consumerIndex() {
        return ci;
    }

    int entries() {
        return 1 << logSize;
    }

    long events(int type) {
        return byType.get(type & 63);
    }

    long events() {
        long n = 0;
        for (int i = 0; i < 64; i++) {
            n += byType.get(i);
        }
        return n;
    }
}
