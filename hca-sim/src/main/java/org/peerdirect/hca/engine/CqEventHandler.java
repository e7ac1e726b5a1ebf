package org.peerdirect.hca.engine;

/**
 * Where the device's event queue delivers CQ events (completion events of armed CQs and CQ
 * errors), as {@code mlx4_cq_completion} / {@code mlx4_cq_event} receive them from the EQ
 * interrupt. The ConnectX-3 personality calls it directly on the producing thread (the
 * documented firmware shortcut); the driver installs it when it brings the device up.
 */
@FunctionalInterface
public interface CqEventHandler {

    /**
     * @param cq the CQ
     * @param error true for a CQ error (overrun: {@code MLX4_EVENT_TYPE_CQ_ERROR}), false for a
     *        completion event
     */
    void cqEvent(HwCq cq, boolean error);
}
