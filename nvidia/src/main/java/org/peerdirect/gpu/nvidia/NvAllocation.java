package org.peerdirect.gpu.nvidia;

import java.util.ArrayList;
import java.util.List;

/** One {@code cuMemAlloc}: pages of video memory at [va, va+size) of a process. */
final class NvAllocation {
    final int pid;
    final long va;
    final long size;
    final int[] pages;
    /** cuMemFree or exit has begun: no new pin. */
    boolean freed;
    final List<NvidiaP2pPageTable> tables = new ArrayList<>();

    NvAllocation(int pid, long va, long size, int[] pages) {
        this.pid = pid;
        this.va = va;
        this.size = size;
        this.pages = pages;
    }
}
