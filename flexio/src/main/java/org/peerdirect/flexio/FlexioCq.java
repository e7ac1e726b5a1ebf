package org.peerdirect.flexio;

import java.util.Objects;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * {@code struct flexio_cq}: a CQ whose ring and doorbell record live in the process heap
 * ({@code flexio_qmem} of type DPA, through the process DUMEM), its element a DPA thread
 * ({@code FLEXIO_CQ_ELEMENT_TYPE_DPA_THREAD}: a CQE on the armed CQ triggers the handler) or none
 * ({@code NON_DPA_CQ}: a handler polls it); a DPA_THREAD CQ is armed at creation with consumer index 0
 * (as {@code flexio_cq_create} without {@code no_arm}). The other element types ({@code EXT_EQ},
 * {@code DPA_MSIX_EMULATED_CQ}) are not modelled (DPA_MODEL.md §6).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_cq_create</a>
 */
public final class FlexioCq extends FlexioObject {

    /** {@code flexio_cq_element_type}. */
    public enum ElementType {
        /** {@code FLEXIO_CQ_ELEMENT_TYPE_DPA_THREAD} (0). */
        DPA_THREAD,
        /** {@code FLEXIO_CQ_ELEMENT_TYPE_NON_DPA_CQ} (8). */
        NON_DPA_CQ
    }

    /**
     * {@code struct flexio_cq_attr}: {@code 2^logCqDepth} CQEs at {@code ringDaddr}, the doorbell
     * record at {@code dbrDaddr} (both in the heap, the ring's CQEs set invalid by the caller),
     * the element and, for DPA_THREAD, its handler.
     */
    public record Attr(int logCqDepth, ElementType elementType, FlexioEventHandler thread, long ringDaddr, long dbrDaddr) {
        public Attr {
            Objects.requireNonNull(elementType, "element_type");
            if (elementType == ElementType.DPA_THREAD && thread == null) {
                throw new IllegalArgumentException("a CQ of element type DPA_THREAD needs its thread");
            }
        }
    }

    private FlexioCq(FlexioProcess p, DevxObj o) {
        super(p, o);
    }

    /** {@code flexio_cq_create}: FAILED names the refusal (a ring outside the heap, a thread of another process). */
    public static FlexioCq create(FlexioProcess p, Attr a) {
        return make(p, "flexio_cq_create", () -> {
            long base = p.processMemInfoGet().base();
            boolean dpa = a.elementType() == ElementType.DPA_THREAD;
            int element = dpa ? a.thread().id() : Mlx5dv.devxQueryEqn(p.ctx, 0);
            FlexioCq cq = new FlexioCq(p, Mlx5dv.devxObjCreate(p.ctx, Prm.createCq(a.logCqDepth(), p.uar().page(), element, dpa,
                    p.dumemId(), a.ringDaddr() - base, a.dbrDaddr() - base), 16));
            if (dpa) { // armed with consumer index 0, as flexio_cq_create without no_arm: the first CQE triggers the thread
                Mlx5dv.devxUarWrite64(p.uar(), Cq.UAR_CQ_DOORBELL, Long.reverseBytes((long) Cq.DB_REQ_NOT << 32 | cq.cqNum()));
            }
            return cq;
        });
    }

    /** {@code flexio_cq_get_cq_num}. */
    public int cqNum() {
        return Prm.index(obj);
    }

    @Override
    public String toString() {
        return "cq 0x" + Integer.toHexString(cqNum()) + " of " + process;
    }
}
