package org.peerdirect.kernel.mm;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * The memory manager of one simulated kernel: physical memory, swap, the processes' address
 * spaces, and reclaim under memory pressure. Published as an OSGi service by sim-kernel; tests
 * may build one directly.
 */
public class Mm implements AutoCloseable {

    /** {@code PAGE_SHIFT}, {@code PAGE_SIZE}: 4 KiB pages. */
    public static final int PAGE_SHIFT = 12;
    public static final long PAGE_SIZE = 1L << PAGE_SHIFT;
    /** Highest buddy order ({@code MAX_PAGE_ORDER}): 2^10 frames = 4 MiB blocks. */
    public static final int MAX_ORDER = 10;
    /** {@code HPAGE_SHIFT - PAGE_SHIFT}: 2 MiB huge pages. */
    public static final int HPAGE_ORDER = 9;
    public static final long HPAGE_SIZE = PAGE_SIZE << HPAGE_ORDER;

    static {
        PhysicalMemory.setOwnerAccess(mm -> mm.phys);
    }

    /** Default RLIMIT_MEMLOCK of a new process: 8 MiB, the usual distribution default. */
    public static final long DEFAULT_MEMLOCK = 8L << 20;

    private final PhysicalMemory phys;
    private final SwapDevice swap;
    private final Map<Integer, AddressSpace> processes = new ConcurrentHashMap<>();
    /** Linux's bounds for {@code kernel.pid_max}: PID_MAX_DEFAULT, PID_MAX_LIMIT (64-bit), PID_MAX_MIN. */
    public static final int PID_MAX_DEFAULT = 32768;

    /**
     * Memory for a device model (a GPU's video memory, an SSD's buffer): {@code bytes} of zeroed
     * host memory committed page by page only when touched, as the machine's frames are, freed
     * with {@code arena}. So a 1 GiB GPU costs the host what its users touched.
     *
     * @since 0.8
     */
    public static java.lang.foreign.MemorySegment deviceMemory(long bytes, java.lang.foreign.Arena arena) {
        return org.peerdirect.kernel.mm.internal.PhysicalMemory.mapAnonymous(bytes, arena);
    }
    public static final int PID_MAX_LIMIT = 4 * 1024 * 1024;
    public static final int PID_MAX_MIN = 301;
    /** After wrapping, pids restart here (RESERVED_PIDS in kernel/pid.c): low pids stay for daemons. */
    static final int RESERVED_PIDS = 300;
    /** Guards pid allocation: {@link #lastPid}, and the check-then-put on {@link #processes}. */
    private final Object pidLock = new Object();
    private int lastPid = 99;
    private volatile int pidMax = PID_MAX_DEFAULT;
    private final AtomicLong reclaimed = new AtomicLong();
    private volatile long defaultMemlock = DEFAULT_MEMLOCK;

    public Mm(long memoryBytes, boolean poison, Path swapFile, long swapBytes) {
        this.phys = new PhysicalMemory(memoryBytes, poison);
        this.swap = new SwapDevice(swapFile, swapBytes);
        phys.setReclaimer(this::reclaim);
    }

    /** Frames of physical memory ({@code totalram_pages()}). */
    public long totalFrames() {
        return phys.nrFrames();
    }

    /** Free frames ({@code nr_free_pages()}). */
    public long freeFrames() {
        return phys.freeFrames();
    }

    /** Huge pages in use ({@code HugePages_Total - HugePages_Free}). */
    public long hugePagesInUse() {
        return phys.hugePagesInUse();
    }

    /**
     * {@code alloc_pages(GFP_KERNEL, order)}: 2^order contiguous, zeroed frames for a kernel
     * driver (a peer-memory client's device memory, say); returns the head frame number. Reclaims
     * once when memory is short, then fails with ENOMEM.
     */
    public long allocPages(int order) {
        return phys.allocPages(order, PhysicalMemory.KERNEL, 0);
    }

    /**
     * {@code __free_pages}: gives back a block {@link #allocPages} returned. Only kernel
     * allocations can be freed this way, so a driver cannot free a process's page.
     */
    public void freePages(long pfn, int order) {
        kernelBlock(pfn, order, "free_pages");
        phys.freePages(pfn, order);
    }

    /**
     * {@code page_address}: the kernel's view of a block {@link #allocPages} returned, valid until
     * it is freed. A process's pages are not reachable this way.
     */
    public MemorySegment pageAddress(long pfn, int order) {
        kernelBlock(pfn, order, "page_address");
        return phys.memory().asSlice(pfn << PAGE_SHIFT, PAGE_SIZE << order);
    }

    private void kernelBlock(long pfn, int order, String what) {
        if (order < 0 || order > MAX_ORDER || pfn < 0 || pfn + (1L << order) > phys.nrFrames()) {
            throw new KernelException(Errno.EINVAL, what + ": pfn " + pfn + " order " + order + " is outside physical memory");
        }
        if (phys.isFree(pfn) || phys.kind(pfn) != PhysicalMemory.KERNEL || phys.head(pfn) != pfn || phys.order(pfn) != order) {
            throw new KernelException(Errno.EINVAL, what + ": pfn " + pfn + " order " + order + " is not a block allocated by alloc_pages");
        }
    }

    SwapDevice swap() {
        return swap;
    }

    /** A new process with an empty address space. */
    public AddressSpace createProcess(String name) {
        synchronized (pidLock) {
            int pid = allocPidLocked();
            AddressSpace as = new AddressSpace(this, pid, name, defaultMemlock);
            processes.put(pid, as);
            return as;
        }
    }

    /**
     * The next free pid after the last one given, wrapping to {@link #RESERVED_PIDS} at pid_max,
     * as {@code alloc_pid} does: pids are reused, and a full table is EAGAIN (fork's answer), so
     * a script spawning in a loop gets an error instead of filling the heap.
     *
     * @see "kernel/pid.c alloc_pid()"
     */
    private int allocPidLocked() {
        assert Thread.holdsLock(pidLock);
        int max = pidMax;
        int pid = lastPid;
        for (int tries = 0; tries < max; tries++) {
            pid++;
            if (pid >= max) {
                pid = RESERVED_PIDS;
            }
            if (!processes.containsKey(pid)) {
                lastPid = pid;
                return pid;
            }
        }
        throw new KernelException(Errno.EAGAIN, "fork: no free process id (" + processes.size()
                + " processes alive, pid_max " + max + "): kill some (kernel:ps, kernel:kill)");
    }

    /** {@code /proc/sys/kernel/pid_max}: pids are below it; {@link #PID_MAX_MIN}..{@link #PID_MAX_LIMIT}. */
    public void setPidMax(int max) {
        if (max < PID_MAX_MIN || max > PID_MAX_LIMIT) {
            throw new KernelException(Errno.EINVAL, "pid_max " + max + " is outside " + PID_MAX_MIN + ".."
                    + PID_MAX_LIMIT);
        }
        pidMax = max;
    }

    public int pidMax() {
        return pidMax;
    }

    public void setDefaultMemlock(long bytes) {
        defaultMemlock = bytes;
    }

    /**
     * The live process {@code pid}: what a driver asks before it maps into a process a caller named.
     *
     * @throws KernelException EINVAL when there is no such process or it is exiting
     */
    public AddressSpace process(int pid) {
        AddressSpace as = processes.get(pid);
        if (as == null || as.exited()) {
            throw new KernelException(Errno.EINVAL, "no process " + pid + (as == null ? "" : " (it is exiting)"));
        }
        return as;
    }

    /** The live process {@code pid}, or null: for callers that clean up after a process that may be gone. */
    public AddressSpace findProcess(int pid) {
        return processes.get(pid);
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
            got += Vmscan.tryReclaim(as, wanted - got);
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
                String.format("%-16s %8d", "HugePages_Total:", phys.totalBytes() / HPAGE_SIZE),
                String.format("%-16s %8d", "HugePages_InUse:", phys.hugePagesInUse()),
                line("Hugepagesize", HPAGE_SIZE / kb),
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
