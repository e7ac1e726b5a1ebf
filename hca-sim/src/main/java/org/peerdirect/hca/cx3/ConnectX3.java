package org.peerdirect.hca.cx3;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.hca.engine.HcaDevice;

/**
 * What is left of the ConnectX-3's side channel while the driver moves onto its PCI function:
 * the bring-up, the firmware queries, the EQs and their events go through the HCR command
 * interface ({@link org.peerdirect.hca.cx3.ifc}); the verbs objects are still created on the
 * engine {@link #engine()} returns, reached through {@code fn.firmware(ConnectX3.class)}.
 */
@ProviderType
public interface ConnectX3 {

    int VENDOR_ID = 0x15b3;
    int DEVICE_ID = 0x1003;

    /**
     * The device's engine once the driver's {@code INIT_HCA} brought it up.
     *
     * @throws IllegalStateException before that
     */
    HcaDevice engine();
}
