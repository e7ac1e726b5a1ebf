package org.peerdirect.hca.cx3.ifc;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The byte orders of the ConnectX-3's structures: every multi-byte field of a mailbox, a context,
 * an EQE, a CQE or a WQE is big-endian ({@code __be16}/{@code __be32}/{@code __be64}), at any
 * alignment the layout gives it.
 */
public final class Be {

    public static final ValueLayout.OfShort BE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    public static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    public static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    public static final ValueLayout.OfByte U8 = ValueLayout.JAVA_BYTE;

    private Be() {
    }
}
