package org.peerdirect.mlx5.ib;

import org.peerdirect.ib.core.provider.IbAhOps;
import org.peerdirect.ib.core.verbs.IbvAhAttr;

/**
 * mlx5_ib's address handles ({@code drivers/infiniband/hw/mlx5/ah.c}): an mlx5 AH is only the
 * address vector ({@code struct mlx5_av}) in software, which the library copies into each UD
 * send WQE; no command creates it and the hardware holds nothing to free.
 *
 * @see "drivers/infiniband/hw/mlx5/ah.c: mlx5_ib_create_ah, create_ib_ah, mlx5_ib_destroy_ah"
 */
final class Mlx5IbAh {

    private Mlx5IbAh() {
    }

    /** {@code mlx5_ib_create_ah} ({@code create_ib_ah}): the address vector of {@code a}. */
    static IbAhOps create(IbvAhAttr a) {
        return IbAhOps.addressVector(a);
    }
}
