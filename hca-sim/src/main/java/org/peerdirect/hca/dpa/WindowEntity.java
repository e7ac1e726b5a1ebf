package org.peerdirect.hca.dpa;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One of a thread's two window entities ({@code FLEXIO_DEV_WINDOW_ENTITY_0/1}): the window object
 * and mkey it is configured with, and its cache of 64-byte lines of host memory. Lines fill by DMA
 * through the mkey on a miss and hit until {@code window_read_inv}; stores stay dirty in the line
 * until {@code window_writeback} (no eviction: what strict mode assumes). Touched only by the
 * owning thread's activation.
 */
final class WindowEntity {

    static final int LINE = 64;

    /** A cached line: its bytes, which are valid, which are dirty, hits since the fill, and a write site. */
    static final class Line {
        final MemorySegment bytes = Arena.ofAuto().allocate(LINE);
        long valid;
        long dirty;
        int hits;
        String site;
    }

    Window window;
    int mkey;
    WindowPort.Mkey key;
    final Map<Long, Line> lines = new LinkedHashMap<>();

    boolean configured() {
        return window != null;
    }

    static long mask(int off, int len) {
        return len == 64 ? -1L : ((1L << len) - 1) << off;
    }
}
