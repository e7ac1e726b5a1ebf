package org.peerdirect.flexio;

import static org.peerdirect.hca.cx4.ifc.DpaObj.OBJ_DPA_WINDOW;
import static org.peerdirect.hca.cx4.ifc.DpaObj.WINDOW_PD;
import static org.peerdirect.hca.cx4.ifc.DpaObj.WINDOW_PROCESS;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * {@code struct flexio_window}: a window of a process bound to a PD; a DPA thread configures it
 * with an mkey of that PD ({@code flexio_dev_window_config}) and reaches host memory through it
 * (through the mkey and the host IOMMU only).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_window_create</a>
 */
public final class FlexioWindow extends FlexioObject {

    private FlexioWindow(FlexioProcess p, DevxObj o) {
        super(p, o);
    }

    /** {@code flexio_window_create(process, pd)}: {@code pdn} a PD of the caller's context (the process's: {@link FlexioProcess#pdn}). */
    public static FlexioWindow create(FlexioProcess p, int pdn) {
        return make(p, "flexio_window_create", () -> new FlexioWindow(p, Prm.create(p.ctx, OBJ_DPA_WINDOW, c -> {
            WINDOW_PROCESS.set(c, 0, p.id());
            WINDOW_PD.set(c, 0, pdn);
        })));
    }

    /** {@code flexio_window_get_id}. */
    public int id() {
        return objectId();
    }

    @Override
    public String toString() {
        return "window " + id() + " of " + process;
    }
}
