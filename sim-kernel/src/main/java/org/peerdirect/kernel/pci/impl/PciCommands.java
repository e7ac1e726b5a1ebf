package org.peerdirect.kernel.pci.impl;

import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * {@code kernel:lspci [-v]}: the functions on the bus as {@code lspci -nn} shows them,
 * {@code 0000:03:00.0 Infiniband controller [0207]: ConnectX-4 [15b3:1013]}; with {@code -v} also
 * every BAR and the MSI-X vectors that were ever used, with raised/delivered counts.
 */
@Component(service = PciCommands.class, property = {"osgi.command.scope=kernel", "osgi.command.function=lspci"})
public final class PciCommands {

    private final PciBus bus;

    @Activate
    public PciCommands(@Reference PciBus bus) {
        this.bus = bus;
    }

    @Descriptor("the PCI functions on the bus (device models put theirs there)")
    public String lspci() {
        return list(false);
    }

    @Descriptor("the PCI functions with BARs, MSI-X and driver. Example: kernel:lspci -v")
    public String lspci(@Descriptor("-v for details, -nn for numeric ids") String option) {
        return switch (option) {
            case "-v", "-vv", "-nnv", "-vnn" -> list(true);
            case "-nn" -> list(false);
            default -> throw new org.peerdirect.kernel.shell.UsageException("kernel:lspci: unknown option '" + option + "' (it takes -v, -vv or -nn)");
        };
    }

    private String list(boolean verbose) {
        List<PciFunction> functions = bus.functions();
        if (functions.isEmpty()) {
            return "no PCI functions";
        }
        StringBuilder sb = new StringBuilder();
        for (PciFunction f : functions) {
            sb.append(String.format("%s %s [%04x]: %s [%04x:%04x]%n", f.bdf(), className(f.classCode()),
                    f.classCode() >>> 8, f.name(), f.vendorId(), f.deviceId()));
            if (verbose) {
                details(f, sb);
            }
        }
        return sb.toString().stripTrailing();
    }

    private static void details(PciFunction f, StringBuilder sb) {
        for (int bar = 0; bar < PciDeviceSpec.MAX_BARS; bar++) {
            long size = f.barSize(bar);
            if (size > 0) {
                sb.append(String.format("\tRegion %d: Memory (64-bit, non-prefetchable) [size=%s]%n", bar, size(size)));
            }
        }
        if (f.present()) {
            try {
                // lspci -v prints the IOMMU group; here each function has its own domain, named by its address
                sb.append(String.format("\tIOMMU domain: %s, %d page(s) mapped (driver: fn.dma(), device: fn.dmaPort())%n", f.bdf(),
                        f.dma().mappedPages()));
            } catch (org.peerdirect.kernel.mm.KernelException noIommu) {
                // a bus without IOMMU: nothing to show
            }
        }
        int n = f.msixVectors();
        if (n == 0) {
            sb.append('\n');
            return;
        }
        sb.append(String.format("\tCapabilities: MSI-X: Count=%d%n", n));
        int idle = 0;
        for (int v = 0; v < n; v++) {
            long raised = f.msixRaised(v);
            boolean requested = f.irqRequested(v);
            boolean pending = f.msixPending(v);
            if (raised == 0 && !requested && !pending) {
                idle++;
                continue;
            }
            sb.append(String.format("\t\tvector %d: raised %d, delivered %d%s%s%n", v, raised, f.msixDelivered(v),
                    pending ? ", pending" : "", requested ? ", handler irq/" + v + "-" + f.bdf() : ""));
        }
        if (idle > 0) {
            sb.append(String.format("\t\t%d vector%s never used%n", idle, idle == 1 ? "" : "s"));
        }
        sb.append('\n');
    }

    /** lspci's size notation: 4K, 32M, 1G. */
    static String size(long bytes) {
        String[] units = {"", "K", "M", "G"};
        int u = 0;
        while (u < units.length - 1 && bytes >= 1024 && bytes % 1024 == 0) {
            bytes /= 1024;
            u++;
        }
        return bytes + units[u];
    }

    /** The names pci.ids gives the classes peerdirect's models use (class and sub-class). */
    static String className(int classCode) {
        return switch (classCode >>> 8) {
            case 0x0100 -> "SCSI storage controller";
            case 0x0106 -> "SATA controller";
            case 0x0108 -> "Non-Volatile memory controller";
            case 0x0200 -> "Ethernet controller";
            case 0x0207 -> "Infiniband controller";
            case 0x0280 -> "Network controller";
            case 0x0300 -> "VGA compatible controller";
            case 0x0302 -> "3D controller";
            case 0x0500 -> "RAM memory";
            case 0x0580 -> "Memory controller";
            case 0x0604 -> "PCI bridge";
            case 0x0b40 -> "Co-processor";
            case 0x1200 -> "Processing accelerators";
            default -> String.format("Class %04x", classCode >>> 8);
        };
    }
}
