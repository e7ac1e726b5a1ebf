package org.peerdirect.mlx4.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import java.lang.foreign.MemorySegment;
import java.util.function.Consumer;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.QpContext;

/**
 * {@code qp.c}'s {@code mlx4_qp_modify}: a transition command with the QP context in a mailbox
 * ({@code 2RST_QP} takes none; {@code 2ERR_QP} carries it, which is how a QP still in RESET
 * reaches ERR with its SRQ known), and {@code mlx4_qp_query}.
 */
public final class Qp {

    private Qp() {
    }

    /** Runs transition {@code op} on {@code qpn}; {@code fill} writes the context (from {@link QpContext#CONTEXT}). */
    public static void modify(Mlx4Dev dev, int qpn, int op, int optparam, Consumer<MemorySegment> fill) {
        if (op == Mlx4Cmd.TWO_RST_QP) {
            dev.cmd.cmd(0, qpn, 2, op);
            return;
        }
        DmaCoherentPages.Page box = dev.dma.alloc();
        try {
            box.mem().set(org.peerdirect.hca.cx3.ifc.Be.BE32, QpContext.OPTPARAM, optparam);
            fill.accept(box.mem().asSlice(QpContext.CONTEXT));
            dev.cmd.box(box.iova(), 0, qpn, 0, op);
        } finally {
            dev.dma.free(box);
        }
    }

    /** {@code mlx4_qp_query}: the context as the device keeps it (a copy, from {@link QpContext#CONTEXT}). */
    public static MemorySegment query(Mlx4Dev dev, int qpn) {
        DmaCoherentPages.Page box = dev.dma.alloc();
        try {
            dev.cmd.box(0, box.iova(), qpn, 0, Mlx4Cmd.QUERY_QP);
            return MemorySegment.ofArray(box.mem().asSlice(QpContext.CONTEXT, QpContext.MAILBOX_SIZE - QpContext.CONTEXT)
                    .toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
        } finally {
            dev.dma.free(box);
        }
    }
}
