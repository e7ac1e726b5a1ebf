package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;

/** {@code struct ib_ah}'s driver part: the address vector a UD send carries. */
@ConsumerType
public interface IbAhOps {
    int dlid();

    int portNum();

    /** {@code destroy_ah}. */
    void destroyAh();
}
