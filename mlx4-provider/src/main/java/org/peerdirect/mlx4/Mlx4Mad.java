package org.peerdirect.mlx4;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx3.ifc.Mad;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Mlx4Dev;

/**
 * {@code mad.c}'s {@code mlx4_MAD_IFC}: a subnet-management Get of one attribute through the
 * firmware's agent, as {@code mlx4_ib_query_port} and {@code init_node_data} ask for PortInfo
 * and NodeInfo, or a performance-management Get (PortCounters, PortCountersExtended) as
 * {@code mlx4_ib_process_mad} passes the PMA's to the firmware on an InfiniBand port.
 */
final class Mlx4Mad {

    /** {@code MLX4_MAD_IFC_IGNORE_MKEY | MLX4_MAD_IFC_IGNORE_BKEY}. */
    private static final int IGNORE_KEYS = 0x3;

    private Mlx4Mad() {
    }

    /** The attribute's data (a copy of the MAD after its header: the SMP's 64 bytes of data first). */
    static MemorySegment get(Mlx4Dev dev, int port, int attrId) {
        return get(dev, port, Mad.MGMT_CLASS_SUBN_LID_ROUTED, attrId);
    }

    /** A Get of {@code attrId} in management class {@code mgmtClass} (an SMP, or the PMA's): the MAD after its header. */
    static MemorySegment get(Mlx4Dev dev, int port, int mgmtClass, int attrId) {
        DmaCoherentPages.Page in = dev.dma.alloc();
        DmaCoherentPages.Page out = null;
        try {
            out = dev.dma.alloc();
            MemorySegment m = in.mem();
            m.set(U8, Mad.BASE_VERSION, (byte) 1);
            m.set(U8, Mad.MGMT_CLASS, (byte) mgmtClass);
            m.set(U8, Mad.CLASS_VERSION, (byte) 1);
            m.set(U8, Mad.METHOD, (byte) Mad.METHOD_GET);
            m.set(BE16, Mad.ATTR_ID, (short) attrId);
            dev.cmd.box(in.iova(), out.iova(), port, IGNORE_KEYS, Mlx4Cmd.MAD_IFC);
            int status = out.mem().get(BE16, Mad.STATUS) & 0xffff;
            if (status != 0) {
                throw new KernelException(Errno.EINVAL, String.format("%s: MAD_IFC Get(0x%04x) on port %d: MAD status 0x%x", dev.name, attrId,
                        port, status));
            }
            // an SMP's data is 64 bytes, a PMA MAD's 192: the whole rest of the MAD
            return MemorySegment.ofArray(out.mem().asSlice(Mad.DATA, Mad.SIZE - Mad.DATA).toArray(ValueLayout.JAVA_BYTE));
        } finally {
            dev.dma.free(in);
            dev.dma.free(out);
        }
    }
}
