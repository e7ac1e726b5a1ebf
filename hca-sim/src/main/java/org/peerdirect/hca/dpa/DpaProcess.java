package org.peerdirect.hca.dpa;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A DPA process (the DPA_PROCESS object): its uid (the DevX user context that created it), PD and
 * UAR, its image and the class loader holding the image's classes and statics, its DPA memory
 * regions (heap and adopted DPA_MEM objects), threads, outboxes and windows, and its
 * {@code dpa_process_status}. Object maps and {@code status} are guarded by the RTOS lock.
 */
final class DpaProcess {

    final int id;
    final int uid;
    final int pd;
    final int uar;
    final Image image;
    /** The process's loader; cleared at destroy so it can go. */
    ImageLoader loader;
    final DpaMemory.Region heap;
    final List<DpaMemory.Region> regions = new ArrayList<>();
    final Map<Integer, DpaThread> threads = new LinkedHashMap<>();
    final Map<Integer, Outbox> outboxes = new LinkedHashMap<>();
    final Map<Integer, Window> windows = new LinkedHashMap<>();
    volatile int status;
    /** Crash data ({@code flexio_crash_data}'s text): what ended the process and where. */
    volatile String crash = "";
    /** The thread whose error ended the process (-1: the host or none) and its handler's line then ({@code flexio_crash_data}). */
    volatile int failedThread = -1;
    volatile String failedSite = "";
    /** No new activations; running ones unwind at their next ISA call. */
    volatile boolean ended;
    /** Doorbells on queues of other processes, dropped. */
    long foreignDoorbells;
    long unsupportedDoorbells;

    /** The image's entries by symbol index; a {@code __dpa_global__}'s slot is null (only RPC entries are {@code Dpa.call}ed). */
    private volatile java.lang.invoke.MethodHandle[] rpcEntries;

    DpaProcess(int id, int uid, int pd, int uar, Image image, ImageLoader loader, DpaMemory.Region heap,
            java.lang.invoke.MethodHandle[] rpcEntries) {
        this.rpcEntries = rpcEntries;
        this.id = id;
        this.uid = uid;
        this.pd = pd;
        this.uar = uar;
        this.image = image;
        this.loader = loader;
        this.heap = heap;
        regions.add(heap);
    }

    /** The {@code __dpa_rpc__} entry at symbol index {@code symbol}, or null when there is none. */
    java.lang.invoke.MethodHandle rpcEntry(int symbol) {
        java.lang.invoke.MethodHandle[] e = rpcEntries;
        return symbol >= 0 && symbol < e.length ? e[symbol] : null;
    }

    /** At destroy, with {@link #loader}: nothing of the image stays reachable from the process. */
    void dropEntries() {
        rpcEntries = new java.lang.invoke.MethodHandle[0];
    }

    /** Whether [a, a+len) lies in one of the process's regions. */
    boolean owns(long a, long len) {
        for (DpaMemory.Region r : regions) {
            if (r.contains(a, len)) {
                return true;
            }
        }
        return false;
    }

    /** One line of {@code dpa:ps}. */
    String describe() {
        return String.format("process %d uid %d pd %d uar %d status 0x%02x heap 0x%x+%d threads %d%s", id, uid, pd, uar,
                status, heap.base(), heap.size(), threads.size(), crash.isEmpty() ? "" : " crash: " + crash);
    }
}
