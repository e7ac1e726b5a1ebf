package org.peerdirect.hca.wire;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.zip.CRC32;

/**
 * One Ethernet frame buffer (an skb's role): a direct buffer the link sends from and receives
 * into, the segment view the layouts read and write, the frame's length, and the scratch of the
 * ICRC. A frame belongs to one thread at a time; made once and reused, so the packet path
 * allocates nothing.
 */
public final class Frame {

    /** Jumbo frames fit: 9000 bytes of MTU plus the Ethernet header and slack. */
    public static final int CAPACITY = 9216;

    public final ByteBuffer buf = ByteBuffer.allocateDirect(CAPACITY);
    public final MemorySegment seg = MemorySegment.ofBuffer(buf);
    /** Bytes of the frame. */
    public int len;
    final CRC32 crc = new CRC32();
    /** The masked headers of {@link RxeIcrc}: 8 bytes of the LRH placeholder, IPv4 (up to 60), UDP, BTH. */
    final byte[] masked = new byte[8 + 60 + 8 + 12];

    /** The buffer positioned over the frame's bytes, ready to send. */
    public ByteBuffer toSend() {
        return buf.limit(len).position(0);
    }

    /** Copies {@code o}'s bytes into this frame. */
    public void copyFrom(Frame o) {
        MemorySegment.copy(o.seg, 0, seg, 0, o.len);
        len = o.len;
    }
}
