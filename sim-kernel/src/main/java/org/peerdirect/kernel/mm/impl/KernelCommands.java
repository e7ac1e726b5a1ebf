package org.peerdirect.kernel.mm.impl;

import java.util.ArrayList;
import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.Vma;

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

    public String meminfo() {
        return String.join("\n", mm.meminfo());
    }

    public String iommu() {
        List<String> out = new ArrayList<>();
        out.add(String.format("%-20s %10s %10s %14s %14s %6s", "domain", "mapped", "faults", "dma_read", "dma_written", "uaf"));
        for (IommuDomain d : iommu.domains()) {
            out.add(String.format("%-20s %10d %10d %14d %14d %6d", d.name(), d.mappedPages(), d.faultCount(),
                    d.bytesRead(), d.bytesWritten(), d.useAfterFreeCount()));
        }
        IommuAudit a = iommu.audit();
        out.add(String.format("audit: faults=%d use_after_free=%d freed_while_mapped=%d live_mappings=%d leaked_at_destroy=%d -> %s",
                a.faults(), a.useAfterFree(), a.freedWhileMapped(), a.liveMappings(), iommu.leakedAtDestroy(),
                a.violationFree() ? "OK" : "VIOLATIONS"));
        return String.join("\n", out);
    }

    public String ps() {
        List<String> out = new ArrayList<>();
        out.add(String.format("%6s %-20s %10s %10s %10s %8s", "PID", "NAME", "RSS(kB)", "SWAP(kB)", "PINNED(kB)", "FAULTS"));
        for (AddressSpace as : mm.processes()) {
            out.add(String.format("%6d %-20s %10d %10d %10d %8d", as.pid(), as.name(), as.rssPages() * 4,
                    as.swappedPages() * 4, as.pinnedPages() * 4, as.faultCount()));
        }
        return String.join("\n", out);
    }

    public String maps(int pid) {
        return String.join("\n", mm.process(pid).maps());
    }

    public int spawn(String name) {
        return mm.createProcess(name).pid();
    }

    public String mmap(int pid, long bytes) {
        return mmap(pid, bytes, "");
    }

    public String mmap(int pid, long bytes, String huge) {
        boolean h = huge.equals("huge");
        if (!huge.isEmpty() && !h) {
            throw new IllegalArgumentException("third argument is 'huge' or nothing, not '" + huge + "'");
        }
        long addr = mm.process(pid).mmap(0, bytes, Vma.PROT_READ | Vma.PROT_WRITE, h ? Vma.Kind.HUGETLB : Vma.Kind.ANON,
                h ? "[hugetlb]" : "[anon]");
        return String.format("0x%x", addr);
    }

    public String touch(int pid, String addr, long bytes) {
        AddressSpace as = mm.process(pid);
        long a = Long.decode(addr);
        long before = as.faultCount();
        for (long off = 0; off < bytes; off += 4096) {
            as.writeLong(a + off, off);
        }
        return String.format("touched %d bytes at 0x%x: %d page faults", bytes, a, as.faultCount() - before);
    }

    public String pageout(int pid, String addr, long bytes) {
        long n = mm.process(pid).madvise(Long.decode(addr), bytes, AddressSpace.Advice.MADV_PAGEOUT);
        return "paged out " + n + " pages";
    }

    public void kill(int pid) {
        mm.process(pid).exit();
    }
}
