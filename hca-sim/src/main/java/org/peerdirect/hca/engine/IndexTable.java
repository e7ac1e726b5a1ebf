package org.peerdirect.hca.engine;

import java.util.BitSet;

/**
 * A hardware object table's index allocator ({@code mlx4_bitmap}): indices in [min, max), handed
 * out round-robin from after the last one (so a freed index is not reused at once) and reused once
 * freed. Exhausted only when {@code max - min} indices are alive. Not thread-safe: the device
 * monitor guards it.
 */
final class IndexTable {
    private final BitSet used = new BitSet();
    private final int min;
    private final int max;
    private int next;
    private int alive;

    IndexTable(int min, int max) {
        this.min = min;
        this.max = max;
        this.next = min;
    }

    /** An unused index, or -1 when every index is alive. */
    int alloc() {
        if (alive == max - min) {
            return -1;
        }
        int i = used.nextClearBit(next);
        if (i >= max) {
            i = used.nextClearBit(min);
        }
        used.set(i);
        alive++;
        next = i + 1 >= max ? min : i + 1;
        return i;
    }

    /** Takes index {@code i} (a driver-chosen number, as mlx4's bitmaps choose them); false when it is outside or alive. */
    boolean claim(int i) {
        if (i < min || i >= max || used.get(i)) {
            return false;
        }
        used.set(i);
        alive++;
        return true;
    }

    void free(int i) {
        if (i >= min && i < max && used.get(i)) {
            used.clear(i);
            alive--;
        }
    }

    int alive() {
        return alive;
    }
}
