package org.peerdirect.hca.cx3;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.hca.engine.HcaDevice;

/**
 * What is left of the ConnectX-3's side channel while the driver moves onto its PCI function:
 * the bring-up, the firmware queries, the EQs and their events go through the HCR command
 * interface ({@link org.peerdirect.hca.cx3.ifc}), and so do the MPTs, CQs, SRQs and QP transitions;
 * CQEs are bytes in the driver's CQ rings; the QPs are still created on the engine
 * {@link #engine()} returns and the queues' WQEs are the engine's slots, reached through
 * {@code fn.firmware(ConnectX3.class)}.
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

    /** The engine's SRQ a driver's {@code SW2HW_SRQ} created, by number, or null. */
    default org.peerdirect.hca.engine.HwSrq srq(int srqn) {
        return engine().srqByNumber(srqn);
    }
}
