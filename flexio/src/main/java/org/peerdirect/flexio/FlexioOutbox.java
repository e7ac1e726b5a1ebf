package org.peerdirect.flexio;

import static org.peerdirect.hca.cx4.ifc.DpaObj.OBJ_DPA_OUTBOX;
import static org.peerdirect.hca.cx4.ifc.DpaObj.OUTBOX_PROCESS;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * {@code struct flexio_outbox}: the object a DPA thread binds ({@code flexio_dev_outbox_config}) to
 * ring doorbells of its process's queues; it uses the process's UAR (the attr's {@code uar} is
 * deprecated and ignored, as in FlexIO).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_outbox_create</a>
 */
public final class FlexioOutbox extends FlexioObject {

    private FlexioOutbox(FlexioProcess p, DevxObj o) {
        super(p, o);
    }

    /** {@code flexio_outbox_create}. */
    public static FlexioOutbox create(FlexioProcess p) {
        return make(p, "flexio_outbox_create", () -> new FlexioOutbox(p,
                Prm.create(p.ctx, OBJ_DPA_OUTBOX, c -> OUTBOX_PROCESS.set(c, 0, p.id()))));
    }

    /** {@code flexio_outbox_get_id}: what {@code flexio_dev_outbox_config} takes. */
    public int id() {
        return objectId();
    }

    @Override
    public String toString() {
        return "outbox " + id() + " of " + process;
    }
}
