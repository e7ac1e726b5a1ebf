package org.peerdirect.ssd.nvme.impl;

import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.BoundDevices;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.ssd.nvme.NvmePmr;

/**
 * Gogo commands for the SSDs, part of {@code nvme.ko}'s bundle (they stay while
 * {@code ssd_peer_mem} comes and goes): {@code ssd:info} (controllers, PMR size and use, pins and
 * invalidations: what the driver knows; the media file and the writes still posted are the
 * model's view, {@code ssd:media}; the {@code ssd_mem} client is {@code peermem:clients}'),
 * {@code ssd:flush} (the PMR write barrier), {@code ssd:read OFFSET LENGTH} and
 * {@code ssd:write OFFSET TEXT} (MMIO through the PMR BAR, as {@code memcpy_fromio}/{@code memcpy_toio}).
 */
@Component(service = SsdCommands.class, property = {"osgi.command.scope=ssd", "osgi.command.function=info", "osgi.command.function=flush",
        "osgi.command.function=read", "osgi.command.function=write"})
public final class SsdCommands {

    /** The controllers by index (dynamic: the commands stay while SSDs come and go). */
    private final BoundDevices<NvmePmr> ssds = new BoundDevices<>(NvmePmr::index);

    @Activate
    public SsdCommands() {
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, unbind = "removeSsd")
    void addSsd(NvmePmr pmr) {
        ssds.add(pmr);
    }

    void removeSsd(NvmePmr pmr) {
        ssds.remove(pmr);
    }

    private NvmePmr ssd(String which) {
        List<NvmePmr> all = ssds.all();
        for (NvmePmr p : all) {
            if (p.name().equals(which) || String.valueOf(p.index()).equals(which)) {
                return p;
            }
        }
        throw new KernelException(Errno.ENODEV, "no SSD " + which + (all.isEmpty() ? " (no SSD at all: org.peerdirect.ssd ssds is 0?)"
                : " (have: " + String.join(", ", all.stream().map(NvmePmr::name).toList()) + ")"));
    }

    @Descriptor("the SSDs as the driver sees them: persistent memory region, mappings, pins, barriers. Example: ssd:info")
    public String info() {
        StringBuilder sb = new StringBuilder();
        List<NvmePmr> all = ssds.all();
        if (all.isEmpty()) {
            return "no SSD (Configuration Admin: org.peerdirect.ssd ssds)\n";
        }
        for (NvmePmr p : all) {
            NvmePmr.Info i = p.info();
            sb.append(String.format("%s  %s  %s (144d:a824), NVMe %s%n", i.name(), i.bdf(), i.model(), i.version()));
            sb.append(String.format("  controller     serial %s, firmware %s, resets %d, async events %d%s, DMA pages live %d (admin queue)%n", i.serial(),
                    i.firmware(), i.resets(), i.asyncEvents(), i.recentEvents().isEmpty() ? "" : " (last result " + String.format("%08x",
                            i.recentEvents().getLast()) + ")", i.dmaPages()));
            sb.append(String.format("  PMR            BAR%d, %d MiB, persistent (write barriers: a read of PMRSTS, a flushing read of a range by a peer: RDMA FLUSH)%n", i.bar(), i.pmrBytes() >> 20));
            sb.append(String.format("  mapped         %d KiB in %d mapping(s), %d pinned by peers%n", i.mappedBytes() >> 10, i.mappings(), i.pinned()));
            sb.append(String.format("  counters       pins %d, invalidations %d, barriers %d, MMIO bytes %d%n", i.pins(), i.invalidations(),
                    i.barriers(), i.mmioBytes()));
            for (String r : i.ranges()) {
                sb.append("    ").append(r).append('\n');
            }
        }
        return sb.toString();
    }

    @Descriptor("makes every write posted to the SSD's PMR persistent (a read of PMRSTS). Example: ssd:flush")
    public String flush(@Descriptor("the SSD: nvme0 (default) or its index") String... which) {
        NvmePmr p = ssd(which.length == 0 ? "0" : which[0]);
        long t0 = System.nanoTime();
        p.flush();
        return String.format("%s: PMR write barrier complete in %.1f us: posted writes are persistent%n", p.name(), (System.nanoTime() - t0) / 1e3);
    }

    @Descriptor("reads bytes of nvme0's PMR through its BAR and prints them as text (non-printable as .). Example: ssd:read 0 32")
    public String read(@Descriptor("PMR offset (0x.. or decimal)") String offset, @Descriptor("bytes, up to 4096") String length) {
        NvmePmr p = ssd("0");
        long off = Args.size("ssd:read", "OFFSET", offset, 0, p.pmrBytes() - 1);
        int len = (int) Args.size("ssd:read", "LENGTH", length, 1, 4096);
        byte[] b = p.read(off, len);
        StringBuilder sb = new StringBuilder(String.format("%s PMR 0x%x+%d: ", p.name(), off, len));
        for (byte x : b) {
            sb.append(x >= 0x20 && x < 0x7f ? (char) x : '.');
        }
        return sb.append('\n').toString();
    }

    @Descriptor("writes text into nvme0's PMR through its BAR (posted: ssd:flush makes it persistent). Example: ssd:write 0 hello")
    public String write(@Descriptor("PMR offset") String offset, @Descriptor("the text") String text) {
        NvmePmr p = ssd("0");
        long off = Args.size("ssd:write", "OFFSET", offset, 0, p.pmrBytes() - 1);
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        p.write(off, b);
        return String.format("%s PMR 0x%x: %d bytes written (posted)%n", p.name(), off, b.length);
    }
}
