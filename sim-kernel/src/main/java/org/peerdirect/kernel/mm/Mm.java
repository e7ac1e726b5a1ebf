package org.peerdirect.kernel.mm;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The memory manager of one simulated kernel: physical memory, swap, the processes' address
 * spaces, and reclaim under memory pressure. Published as an OSGi service by sim-kernel; tests
 * may build one directly.
 */
public class Mm implements AutoCloseable {

    /** Default RLIMIT_MEMLOCK of a new process: 8 MiB, the usual distribution default. */
    public static final long DEFAULT_MEMLOCK = 8L << 20;

    private final PhysicalMemory phys;
    private final SwapDevice swap;
    private final Map<Integer, AddressSpace> processes = new ConcurrentHashMap<>();
    private final AtomicInteger nextPid = new AtomicInteger(100);
    private final AtomicLong reclaimed = new AtomicLong();
    private volatile long defaultMemlock = DEFAULT_MEMLOCK;

    public Mm(long memoryBytes, boolean poison, Path swapFile, long swapBytes) {
        this.phys = new PhysicalMemory(memoryBytes, poison);
        this.swap = new SwapDevice(swapFile, swapBytes);
        phys.setReclaimer(this::reclaim);
    }

    public PhysicalMemory physical() {
        return phys;
    }

    SwapDevice swap() {
        return swap;
    }

    /** A new process with an empty address space. */
    public AddressSpace createProcess(String name) {
        int pid = nextPid.getAndIncrement();
        if (pid >= (1 << 20)) {
            throw new KernelException(Errno.ENOMEM, "out of process ids");
        }
        AddressSpace as = new AddressSpace(this, pid, name, defaultMemlock);
        processes.put(pid, as);
        return as;
    }

    public void setDefaultMemlock(long bytes) {
        defaultMemlock = bytes;
    }

    public AddressSpace process(int pid) {
        AddressSpace as = processes.get(pid);
        if (as == null) {
            throw new KernelException(Errno.EINVAL, "no process " + pid);
        }
        return as;
    }

    public List<AddressSpace> processes() {
        return processes.values().stream().sorted((a, b) -> Integer.compare(a.pid(), b.pid())).toList();
    }

    void exited(AddressSpace as) {
        processes.remove(as.pid());
    }

    /** Frees a frame (or the huge page holding it) once it is neither mapped nor pinned. */
    void releaseIfUnused(long pfn) {
        synchronized (phys) {
            if (phys.isFree(pfn)) {
                return;
            }
            long head = phys.head(pfn);
            if (phys.rmap(head) != 0) {
                return;
            }
            int order = phys.order(head);
            for (long p = head; p < head + (1L << order); p++) {
                if (phys.pinCount(p) != 0) {
                    return;
                }
            }
            phys.freePages(head, order);
        }
    }

    /**
     * Memory pressure: swaps out unpinned anonymous pages of processes whose mmap lock is free
     * (a faulting process is skipped, like a trylock in shrink_page_list). Returns pages freed.
     */
    public long reclaim(long wanted) {
        long got = 0;
        for (AddressSpace as : processes()) {
            if (got >= wanted) {
                break;
            }
            got += as.tryReclaim(wanted - got);
        }
        reclaimed.addAndGet(got);
        return got;
    }

    public long reclaimedPages() {
        return reclaimed.get();
    }

    public long swapSlotsInUse() {
        return swap.slotsInUse();
    }

    public long swapSlots() {
        return swap.totalSlots();
    }

    /** Pinned frames (pin count above zero). */
    public long pinnedFrames() {
        return phys.count(p -> phys.pinCount(p) > 0);
    }

    /** {@code /proc/meminfo}-like lines. */
    public List<String> meminfo() {
        long kb = 1024;
        long total = phys.totalBytes() / kb;
        long free = phys.freeFrames() * 4;
        long anon = processes().stream().mapToLong(AddressSpace::rssPages).sum() * 4;
        long swapTotal = swap.totalSlots() * 4;
        long swapUsed = swap.slotsInUse() * 4;
        return List.of(
                line("MemTotal", total), line("MemFree", free), line("AnonPages", anon),
                line("Mlocked(pinned)", pinnedFrames() * 4), line("SwapTotal", swapTotal),
                line("SwapFree", swapTotal - swapUsed), line("Reclaimed", reclaimed.get() * 4),
                String.format("%-16s %8d", "HugePages_Total:", phys.totalBytes() / PhysicalMemory.HPAGE_SIZE),
                String.format("%-16s %8d", "HugePages_InUse:", phys.hugePagesInUse()),
                line("Hugepagesize", PhysicalMemory.HPAGE_SIZE / kb),
                String.format("%-16s %8d", "Processes:", processes.size()));
    }

    private static String line(String name, long kb) {
        return String.format("%-16s %8d kB", name + ":", kb);
    }

    @Override
    public void close() {
        for (AddressSpace as : processes()) {
            as.exit();
        }
        swap.close();
        phys.close();
    }
}
