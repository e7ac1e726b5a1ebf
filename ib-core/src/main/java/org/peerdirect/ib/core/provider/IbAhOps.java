package org.peerdirect.ib.core.provider;

import java.nio.ByteBuffer;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvAhAttr;

/** {@code struct ib_ah}'s driver part: the address vector a UD send carries. */
@ConsumerType
public interface IbAhOps {
    int dlid();

    int portNum();

    /** {@code is_global}: a GRH to the GID below. */
    boolean isGlobal();

    /** The destination GID, first and last 8 bytes big-endian (0 without a GRH). */
    long dgidHigh();

    long dgidLow();

    int sgidIndex();

    int hopLimit();

    /** {@code destroy_ah}. */
    void destroyAh();

    /**
     * An address handle that is only an address vector in software: the driver copies it into
     * each UD WQE, and the hardware holds nothing to free (mlx4 and mlx5 both).
     */
    static IbAhOps addressVector(IbvAhAttr a) {
        record Av(int dlid, int portNum, boolean isGlobal, long dgidHigh, long dgidLow, int sgidIndex, int hopLimit) implements IbAhOps {
            @Override
            public void destroyAh() {
                // nothing in the hardware
            }
        }
        ByteBuffer g = ByteBuffer.wrap(a.isGlobal ? a.dgid : new byte[16]); // big-endian
        return new Av(a.dlid, a.portNum, a.isGlobal, g.getLong(0), g.getLong(8), a.isGlobal ? a.sgidIndex : 0, a.isGlobal ? a.hopLimit : 0);
    }
}
