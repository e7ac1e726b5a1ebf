package org.peerdirect.hca.cx3;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.hca.engine.HcaDevice;

/**
 * One ConnectX-3 model: published as a service with the property {@code pci.bdf} of its PCI
 * function, so a driver bound to the function finds the firmware interface (the engine) of that
 * very device.
 */
@ProviderType
public interface ConnectX3 {

    int VENDOR_ID = 0x15b3;
    int DEVICE_ID = 0x1003;

    String bdf();

    /** The device's engine: MPT, queues, ports (the firmware's command interface). */
    HcaDevice engine();

    long nodeGuid();

    String firmwareVersion();

    /** PSID / board id, as ibv_devinfo prints it. */
    String boardId();
}
