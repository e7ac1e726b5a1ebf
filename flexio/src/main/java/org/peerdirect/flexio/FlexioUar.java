package org.peerdirect.flexio;

import java.util.Objects;

import org.peerdirect.mlx5.dv.Mlx5dv.DevxUar;

/**
 * {@code struct flexio_uar}: a DevX UAR of the caller's context as a FlexIO process uses it (the
 * UAR page queues name; the outbox's isolation rule lets a process ring only queues of its own
 * uid). The process's own UAR is {@link FlexioProcess#uar}; UAR extension to another device
 * ({@code flexio_uar_extend}) is not modelled (one PF, DPA_MODEL.md §6).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_uar_create, flexio_uar_get_id</a>
 */
public final class FlexioUar {

    private final FlexioProcess process;
    private final DevxUar uar;

    private FlexioUar(FlexioProcess process, DevxUar uar) {
        this.process = process;
        this.uar = uar;
    }

    /**
     * {@code flexio_uar_create(process, devx_uar)}: wraps a UAR the caller allocated
     * ({@code mlx5dv_devx_alloc_uar}) on the process's context; the caller frees it after the
     * objects using it are gone.
     */
    public static FlexioUar create(FlexioProcess process, DevxUar uar) {
        Objects.requireNonNull(uar, "devx_uar");
        if (uar.ctx() != process.ibvContext()) {
            throw new FlexioException(FlexioStatus.FAILED, "flexio_uar_create: the UAR is of another context than the process's");
        }
        return new FlexioUar(process, uar);
    }

    /** {@code flexio_uar_get_id}: its page number. */
    public int id() {
        return uar.page();
    }

    public FlexioProcess process() {
        return process;
    }
}
