package org.peerdirect.testkit;

import java.util.function.Consumer;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.hca.cx3.ConnectX3;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.umem.UmemService;

/**
 * A driver for the machine's ConnectX-3 models: probes one board as a driver's probe function
 * does, e.g. {@code (i, board, umems) -> { Mlx4Device d = new Mlx4Device("mlx4_" + i, board, umems);
 * return new Probed(d, d::removeHardware); }}.
 */
@ConsumerType
@FunctionalInterface
public interface HcaDriver {

    /**
     * The driver's device, and how its hardware goes away (true: surprise removal, false: unbind).
     */
    record Probed(IbDeviceOps device, Consumer<Boolean> removeHardware) {
    }

    /** Probes board {@code index} (the driver names its device, e.g. {@code mlx4_<index>}). */
    Probed probe(int index, ConnectX3 board, UmemService umems);
}
