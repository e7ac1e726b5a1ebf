package org.peerdirect.flexio.dev;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code flexio_dev_msg} / {@code flexio_dev_print}: text from a DPA thread to a host message
 * stream ([model], DPA_MODEL.md §2.5: NVIDIA's mechanism is not public). A stream is a ring in the
 * host process's memory reached through a window; its descriptor, in the process heap, is what the
 * host's {@code FlexioMsgStream} made ({@code flexio_msg_stream_create}) and what device code names
 * the stream by (its DPA address, where the C call takes a stream id: the model has no writable
 * statics to keep a table of ids in).
 *
 * <p>Descriptor (little-endian, 64 bytes): {@code u32 window id | u32 mkey | u64 ring haddr |
 * u64 data size (a power of two) | u32 level | u32 spinlock | u64 producer index}. The ring's
 * first 4 KiB hold the producer index the host reads, the data follows. A message is its text and
 * a newline; the data is written back through the window before the index that publishes it
 * (S001's window sequence), all under the descriptor's spinlock, so concurrent threads' lines do
 * not interleave. Uses window entity 1 (the call configures it).
 */
public final class FlexioDevMsg {

    /** {@code FLEXIO_MSG_DEV_NO_PRINT}. */
    public static final int NO_PRINT = 0;
    /** {@code FLEXIO_MSG_DEV_ALWAYS_PRINT}. */
    public static final int ALWAYS_PRINT = 1;
    /** {@code FLEXIO_MSG_DEV_ERROR}. */
    public static final int ERROR = 2;
    /** {@code FLEXIO_MSG_DEV_WARN}. */
    public static final int WARN = 3;
    /** {@code FLEXIO_MSG_DEV_INFO}. */
    public static final int INFO = 4;
    /** {@code FLEXIO_MSG_DEV_DEBUG}. */
    public static final int DEBUG = 5;

    static final int DESC_WINDOW = 0;
    static final int DESC_MKEY = 4;
    static final int DESC_RING = 8;
    static final int DESC_SIZE = 16;
    static final int DESC_LEVEL = 24;
    static final int DESC_LOCK = 28;
    static final int DESC_PI = 32;
    /** Bytes before the data in the host ring: the producer index's page. */
    static final int RING_HEADER = 4096;

    private FlexioDevMsg() {
    }

    /**
     * {@code flexio_dev_msg(stream, level, text)}: appends {@code text} and a newline when
     * {@code level} passes the stream's level; returns the characters written, 0 when filtered, -1
     * when the stream's window could not be configured (errno set).
     */
    public static int msg(long stream, int level, String text) {
        if (level == NO_PRINT || level > Dpa.ld32(stream + DESC_LEVEL)) {
            return 0;
        }
        FlexioDev.spinLock(stream + DESC_LOCK);
        if (Dpa.windowConfig(Dpa.WINDOW_ENTITY_1, Dpa.ld32(stream + DESC_WINDOW), Dpa.ld32(stream + DESC_MKEY)) != 0) {
            FlexioDev.spinUnlock(stream + DESC_LOCK);
            return -1;
        }
        long ring = Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_1, Dpa.ld64(stream + DESC_RING));
        long mask = Dpa.ld64(stream + DESC_SIZE) - 1;
        long pi = Dpa.ld64(stream + DESC_PI);
        int n = text.length();
        for (int i = 0; i < n; i++) {
            char c = text.charAt(i);
            Dpa.st8(ring + RING_HEADER + (pi + i & mask), c < 0x80 ? c : '?');
        }
        Dpa.st8(ring + RING_HEADER + (pi + n & mask), '\n');
        Dpa.windowWriteback(); // the text before the index that publishes it
        pi += n + 1;
        Dpa.st64(stream + DESC_PI, pi);
        Dpa.st64(ring, pi);
        Dpa.windowWriteback();
        FlexioDev.spinUnlock(stream + DESC_LOCK);
        return n;
    }

    /** {@code flexio_dev_print(text)}: {@link #msg} at {@link #ALWAYS_PRINT}. */
    public static int print(long stream, String text) {
        return msg(stream, ALWAYS_PRINT, text);
    }
}
