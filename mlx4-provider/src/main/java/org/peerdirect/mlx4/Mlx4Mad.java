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
 * and NodeInfo.
 */
final class Mlx4Mad {

    /** {@code MLX4_MAD_IFC_IGNORE_MKEY | MLX4_MAD_IFC_IGNORE_BKEY}. */
    private static final int IGNORE_KEYS = 0x3;

    private Mlx4Mad() {
    }

    /** The attribute's data (a copy of the 64 bytes after the SMP header). */
    static MemorySegment get(Mlx4Dev dev, int port, int attrId) {
        DmaCoherentPages.Page in = dev.dma.alloc();
        DmaCoherentPages.Page out = null;
        try {
            out = dev.dma.alloc();
            MemorySegment m = in.mem();
            m.set(U8, Mad.BASE_VERSION, (byte) 1);
            m.set(U8, Mad.MGMT_CLASS, (byte) Mad.MGMT_CLASS_SUBN_LID_ROUTED);
            m.set(U8, Mad.CLASS_VERSION, (byte) 1);
            m.set(U8, Mad.METHOD, (byte) Mad.METHOD_GET);
            m.set(BE16, Mad.ATTR_ID, (short) attrId);
            dev.cmd.box(in.iova(), out.iova(), port, IGNORE_KEYS, Mlx4Cmd.MAD_IFC);
            int status = out.mem().get(BE16, Mad.STATUS) & 0xffff;
            if (status != 0) {
                throw new KernelException(Errno.EINVAL, String.format("%s: MAD_IFC Get(0x%04x) on port %d: MAD status 0x%x", dev.name, attrId,
                        port, status));
            }
            return MemorySegment.ofArray(out.mem().asSlice(Mad.DATA, 64).toArray(ValueLayout.JAVA_BYTE));
        } finally {
            dev.dma.free(in);
            dev.dma.free(out);
        }
    }
}
