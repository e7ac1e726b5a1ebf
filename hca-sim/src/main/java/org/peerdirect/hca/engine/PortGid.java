package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * How a personality names a port's GID 0, the first entry of its GID table as its query command
 * reports it ({@code ib_cache}'s table, which {@code rxe} fills from the netdev): 16 bytes written
 * at {@code off}. The responder writes the sender's into a UD receive's GRH as the SGID.
 */
@FunctionalInterface
public interface PortGid {

    void write(HcaPort port, MemorySegment to, long off);

    /** Until the personality sets its own: the link-local prefix and the port's LID. */
    PortGid LINK_LOCAL_OF_LID = (p, to, off) -> {
        ValueLayout.OfLong be64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
        to.set(be64, off, 0xfe80_0000_0000_0000L);
        to.set(be64, off + 8, p.lid());
    };
}
