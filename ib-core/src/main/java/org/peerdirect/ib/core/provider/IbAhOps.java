package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;

/** {@code struct ib_ah}'s driver part: the address vector a UD send carries. */
@ConsumerType
public interface IbAhOps {
    int dlid();

    int portNum();

    /** {@code destroy_ah}. */
    void destroyAh();

    /**
     * An address handle that is only an address vector in software: the driver copies it into
     * each UD WQE, and the hardware holds nothing to free (mlx4 and mlx5 both).
     */
    static IbAhOps addressVector(int dlid, int portNum) {
        record Av(int dlid, int portNum) implements IbAhOps {
            @Override
            public void destroyAh() {
                // nothing in the hardware
            }
        }
        return new Av(dlid, portNum);
    }
}
