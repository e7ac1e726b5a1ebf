package org.peerdirect.mlx4.lib;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The context's UAR page and its BlueFlame page as the library has them mapped ({@code mmap} of
 * the device file at offsets 0 and one page: {@code ctx->uar}, {@code ctx->bf_page}): the send
 * doorbell, and write-combined bursts into the BlueFlame register; nothing else of the function.
 */
public final class Mlx4Uar {

    /** The UAR page's index ({@code usr_page} of the context's QPs). */
    public final int index;
    private final PciFunction fn;
    private final long uar;
    private final long bf;

    public Mlx4Uar(PciFunction fn, int index) {
        this.fn = fn;
        this.index = index;
        this.uar = (long) index * Uar.PAGE_SIZE;
        this.bf = Uar.blueFlame(index);
    }

    /** {@code MLX4_SEND_DOORBELL}: be32 {@code qpn << 8} ({@code qp->doorbell_qpn}). */
    void sendDoorbell(int qpn) {
        fn.write32be(2, uar + Uar.SEND_DOORBELL, qpn << 8);
    }

    /** {@code mlx4_bf_copy}: {@code length} bytes of {@code src} from {@code srcOffset} into the BlueFlame register at {@code off}, one burst. */
    void blueFlame(int off, MemorySegment src, long srcOffset, int length) {
        if (off < 0 || off + length > Uar.BF_REG_SIZE) {
            throw new IllegalArgumentException("BlueFlame offset " + off + ": a " + length + "-byte copy leaves the register");
        }
        fn.iowrite64Copy(2, bf + off, src, srcOffset, length);
    }
}
