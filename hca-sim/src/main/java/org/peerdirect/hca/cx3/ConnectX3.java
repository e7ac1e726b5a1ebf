package org.peerdirect.hca.cx3;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.hca.engine.HcaDevice;

/**
 * The firmware interface of one ConnectX-3 model, reached by the bound driver through its PCI
 * function only: {@code fn.firmware(ConnectX3.class)}.
 *
 * <p>The documented shortcut of this personality: the mlx4 command interface (HCR, mailboxes,
 * {@code mlx4_cmd}) and its doorbell registers are not simulated; the driver calls the firmware
 * commands ({@code SW2HW_MPT}, {@code SW2HW_CQ}, QP transitions, ...) on {@link #engine()}
 * directly, in hardware types (MPT entries, QP contexts, CQEs, WQE slots). The ConnectX-4+ model
 * has the real command queue.
 */
@ProviderType
public interface ConnectX3 {

    int VENDOR_ID = 0x15b3;
    int DEVICE_ID = 0x1003;

    String bdf();

    /**
     * {@code INIT_HCA}: brings the device up for the driver bound to {@code fn} (its engine, named
     * by the function's bus address, its ports on the fabric) and returns the engine. Idempotent.
     */
    HcaDevice initHca(org.peerdirect.kernel.pci.PciFunction fn);

    /** The device's engine once {@link #initHca} ran. */
    HcaDevice engine();

    long nodeGuid();

    String firmwareVersion();

    /** PSID / board id, as ibv_devinfo prints it. */
    String boardId();
}
