package org.peerdirect.kernel.mm.impl;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * Gogo commands of the kernel view: {@code kernel:meminfo}, {@code kernel:iommu},
 * {@code kernel:ps}, {@code kernel:maps <pid>}, and a few to drive a process by hand:
 * {@code kernel:spawn <name>}, {@code kernel:mmap <pid> <bytes> [huge]},
 * {@code kernel:touch <pid> <addr> <bytes>}, {@code kernel:pageout <pid> <addr> <bytes>},
 * {@code kernel:kill <pid>}. Addresses accept 0x-hex.
 */
@Component(service = KernelCommands.class, property = {"osgi.command.scope=kernel",
        "osgi.command.function=meminfo", "osgi.command.function=iommu", "osgi.command.function=ps",
        "osgi.command.function=maps", "osgi.command.function=spawn", "osgi.command.function=mmap",
        "osgi.command.function=touch", "osgi.command.function=pageout", "osgi.command.function=kill"})
public final class KernelCommands {

    private final Mm mm;
    private final Iommu iommu;

    @Activate
    public KernelCommands(@Reference Mm mm, @Reference Iommu iommu) {
        this.mm = mm;
        this.iommu = iommu;
    }

    @Descriptor("memory, swap and huge pages, as /proc/meminfo")
    public String meminfo() {
        return String.join("\n", mm.meminfo());
    }

    @Descriptor("IOMMU domains with their mappings, faults and DMA counts, and the audit")
    public String iommu() {
        List<String> out = new ArrayList<>();
        out.add(String.format("%-20s %10s %6s %10s %14s %14s %6s", "domain", "mapped", "2M", "faults", "dma_read", "dma_written", "uaf"));
        for (IommuDomain d : iommu.domains()) {
            out.add(String.format("%-20s %10d %6d %10d %14d %14d %6d", d.name(), d.mappedPages(), d.mappedSuperpages(), d.faultCount(),
                    d.bytesRead(), d.bytesWritten(), d.useAfterFreeCount()));
        }
        IommuAudit a = iommu.audit();
        out.add(String.format("audit: faults=%d use_after_free=%d freed_while_mapped=%d live_mappings=%d leaked_at_destroy=%d -> %s",
                a.faults(), a.useAfterFree(), a.freedWhileMapped(), a.liveMappings(), iommu.leakedAtDestroy(),
                a.violationFree() ? "OK" : "VIOLATIONS"));
        return String.join("\n", out);
    }

    @Descriptor("the simulated processes with resident, swapped and pinned memory")
    public String ps() {
        List<String> out = new ArrayList<>();
        out.add(String.format("%6s %-20s %10s %10s %10s %8s", "PID", "NAME", "RSS(kB)", "SWAP(kB)", "PINNED(kB)", "FAULTS"));
        for (AddressSpace as : mm.processes()) {
            out.add(String.format("%6d %-20s %10d %10d %10d %8d", as.pid(), as.name(), as.rssPages() * 4,
                    as.swappedPages() * 4, as.pinnedPages() * 4, as.faultCount()));
        }
        return String.join("\n", out);
    }

    @Descriptor("the mappings of a process, as /proc/<pid>/maps. Example: kernel:maps $pid")
    public String maps(@Descriptor("process id (kernel:ps lists them)") String pid) {
        return String.join("\n", Args.process(mm, "kernel:maps", pid).maps());
    }

    @Descriptor("starts a simulated process with an empty address space; prints its pid. Example: pid = (kernel:spawn app)")
    public int spawn(@Descriptor("process name, shown by kernel:ps") String name) {
        if (name.isBlank() || name.length() > 64) {
            throw new UsageException("kernel:spawn: a process name is 1 to 64 characters, got '" + name + "'");
        }
        return mm.createProcess(name).pid();
    }

    @Descriptor("maps anonymous memory into a process; prints its address. Example: a = (kernel:mmap $pid 1M)")
    public String mmap(@Descriptor("process id") String pid,
            @Descriptor("length in bytes (K/M/G suffixes), rounded up to the page size") String bytes) {
        return mmap(pid, bytes, "");
    }

    @Descriptor("maps anonymous or 2 MiB huge-page memory into a process. Example: kernel:mmap $pid 4M huge")
    public String mmap(@Descriptor("process id") String pid,
            @Descriptor("length in bytes (K/M/G suffixes)") String bytes,
            @Descriptor("'huge' for a hugetlb mapping") String huge) {
        AddressSpace as = Args.process(mm, "kernel:mmap", pid);
        long len = Args.size("kernel:mmap", "the length", bytes, 1, 1L << 46);
        boolean h = !huge.isEmpty() && Args.oneOf("kernel:mmap", "the third argument", huge, "huge").equals("huge");
        long addr = as.mmap(0, len, Vma.PROT_READ | Vma.PROT_WRITE, h ? Vma.Kind.HUGETLB : Vma.Kind.ANON,
                h ? "[hugetlb]" : "[anon]");
        return String.format("0x%x", addr);
    }

    @Descriptor("writes every page of a range from the CPU (faulting it in). Example: kernel:touch $pid $a 64K")
    public String touch(@Descriptor("process id") String pid, @Descriptor("start address") String addr,
            @Descriptor("length in bytes (K/M/G suffixes)") String bytes) {
        AddressSpace as = Args.process(mm, "kernel:touch", pid);
        long a = Args.address("kernel:touch", addr);
        long len = Args.size("kernel:touch", "the length", bytes, 1, 1L << 40);
        long before = as.faultCount();
        for (long off = 0; off < len; off += 4096) {
            if (Thread.currentThread().isInterrupted()) {
                throw new IllegalStateException("kernel:touch: interrupted after " + off + " bytes");
            }
            as.writeLong(a + off, off);
        }
        return String.format("touched %d bytes at 0x%x: %d page faults", len, a, as.faultCount() - before);
    }

    @Descriptor("pages a range out to swap (MADV_PAGEOUT). Example: kernel:pageout $pid $a 64K")
    public String pageout(@Descriptor("process id") String pid, @Descriptor("start address (page aligned)") String addr,
            @Descriptor("length in bytes (K/M/G suffixes)") String bytes) {
        AddressSpace as = Args.process(mm, "kernel:pageout", pid);
        long n = as.madvise(Args.address("kernel:pageout", addr),
                Args.size("kernel:pageout", "the length", bytes, 1, 1L << 46), AddressSpace.Advice.MADV_PAGEOUT);
        return "paged out " + n + " pages";
    }

    @Descriptor("ends a process: its files are closed (RDMA objects destroyed), then its memory goes. Example: kernel:kill $pid")
    public void kill(@Descriptor("process id") String pid) {
        Args.process(mm, "kernel:kill", pid).exit();
    }
}
