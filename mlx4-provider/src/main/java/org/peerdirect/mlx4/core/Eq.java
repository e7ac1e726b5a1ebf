package org.peerdirect.mlx4.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.hca.cx3.ifc.EqContext;
import org.peerdirect.hca.cx3.ifc.Eqe;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One event queue from the driver's side ({@code eq.c}): a ring of 32-byte EQEs in DMA pages,
 * every owner bit set (hardware's) at the start, its pages in an MTT range, handed to the device
 * by {@code SW2HW_EQ}; its interrupt handler ({@code mlx4_eq_int}) consumes every EQE software
 * owns, hands each to {@link Mlx4Dev#dispatch}, then writes the consumer index with
 * {@code req_not} to the EQ's UAR doorbell ({@code eq_set_ci}).
 *
 * <p>Lock rules: only the interrupt thread of the EQ's vector polls (one handler per vector); the
 * consumer index is confined to it, volatile for the tools.
 */
public final class Eq {

    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    final int eqn;
    final int nent;
    final int vector;
    private final List<DmaCoherentPages.Page> pages;
    private final Mtt.Range mtt;
    private final PciFunction fn;
    private volatile int ci;
    final AtomicLong events = new AtomicLong();

    private Eq(int eqn, int nent, int vector, List<DmaCoherentPages.Page> pages, Mtt.Range mtt, PciFunction fn) {
        this.eqn = eqn;
        this.nent = nent;
        this.vector = vector;
        this.pages = pages;
        this.mtt = mtt;
        this.fn = fn;
    }

    /** {@code mlx4_create_eq}: {@code nent} (a power of two) entries on {@code vector}; not armed yet. */
    static Eq create(Mlx4Dev dev, int eqn, int nent, int vector) {
        int npages = Math.max(1, nent * Eqe.SIZE / 4096);
        List<DmaCoherentPages.Page> pages = new ArrayList<>(npages);
        Mtt.Range mtt = null;
        DmaCoherentPages.Page box = null;
        try {
            long[] iova = new long[npages];
            for (int i = 0; i < npages; i++) {
                DmaCoherentPages.Page p = dev.dma.alloc();
                pages.add(p);
                iova[i] = p.iova();
                for (long off = Eqe.OWNER; off < 4096; off += Eqe.SIZE) {
                    p.mem().set(U8, off, (byte) Eqe.OWNER_BIT);
                }
            }
            mtt = dev.mtt.alloc(npages);
            dev.mtt.write(mtt, 0, iova);
            box = dev.dma.alloc();
            MemorySegment ctx = box.mem();
            ctx.set(BE32, EqContext.FLAGS, EqContext.STATUS_OK | EqContext.STATE_ARMED);
            ctx.set(U8, EqContext.LOG_EQ_SIZE, (byte) Integer.numberOfTrailingZeros(nent));
            ctx.set(U8, EqContext.INTR, (byte) vector);
            ctx.set(U8, EqContext.LOG_PAGE_SIZE, (byte) 0);
            ctx.set(U8, EqContext.MTT_BASE_ADDR_H, (byte) (mtt.addr() >>> 32));
            ctx.set(BE32, EqContext.MTT_BASE_ADDR_L, (int) mtt.addr());
            dev.cmd.box(box.iova(), 0, eqn, 0, Mlx4Cmd.SW2HW_EQ);
            return new Eq(eqn, nent, vector, pages, mtt, dev.fn);
        } catch (RuntimeException e) {
            dev.mtt.free(mtt);
            pages.forEach(dev.dma::free);
            throw e;
        } finally {
            dev.dma.free(box);
        }
    }

    private MemorySegment entry(int index) {
        long off = (long) (index & nent - 1) * Eqe.SIZE;
        return pages.get((int) (off >>> 12)).mem().asSlice(off & 4095, Eqe.SIZE);
    }

    /** {@code eq_set_ci} with {@code req_not}: the device may interrupt again. */
    void arm() {
        fn.write32be(2, Uar.eqDoorbell(eqn), ci & 0xff_ffff | Uar.EQ_REQ_NOT);
    }

    /**
     * {@code mlx4_eq_int}: every EQE whose owner bit matches this pass over the ring
     * ({@code next_eqe_sw}), the owner read first and the rest after it; then re-armed.
     */
    int poll(Mlx4Dev dev) {
        int n = 0;
        for (;;) {
            MemorySegment e = entry(ci);
            boolean hw = ((byte) BYTE.getVolatile(e, (long) Eqe.OWNER) & Eqe.OWNER_BIT) != 0;
            if (hw != ((ci & nent) != 0)) {
                break;
            }
            VarHandle.acquireFence();
            int type = e.get(U8, Eqe.TYPE) & 0xff;
            dev.dispatch(type, e.get(U8, Eqe.SUBTYPE) & 0xff, e);
            ci++;
            n++;
        }
        events.addAndGet(n);
        arm();
        return n;
    }

    /** The command-completion fields of an EQE. */
    static int cmdToken(MemorySegment e) {
        return e.get(BE16, Eqe.CMD_TOKEN) & 0xffff;
    }

    static int cmdStatus(MemorySegment e) {
        return e.get(U8, Eqe.CMD_STATUS) & 0xff;
    }

    static long cmdOut(MemorySegment e) {
        return e.get(BE64, Eqe.CMD_OUT_PARAM);
    }

    /** {@code mlx4_free_eq}: {@code HW2SW_EQ} (tried: a gone device refuses it), then the ring and its MTT go. */
    void destroy(Mlx4Dev dev) {
        try {
            dev.cmd.cmd(0, eqn, 1, Mlx4Cmd.HW2SW_EQ);
        } catch (RuntimeException gone) {
            // the device is gone or was reset: it writes nothing more
        }
        dev.mtt.free(mtt);
        pages.forEach(dev.dma::free);
    }

    public int consumerIndex() {
        return ci;
    }
}
