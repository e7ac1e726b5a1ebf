package org.peerdirect.webconsole;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.ib.core.objects.UverbsObjects;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.sysfs.Sysfs;

/**
 * What the console shows, read from the services the Gogo commands use: the device list
 * ({@code rdma:devices}), the kernel's processes ({@code kernel:ps}), the IOMMU
 * ({@code kernel:iommu}), the sysfs tree (ports under {@code class/infiniband/<dev>/ports}, peer
 * clients' statistics as {@code peermem:stats} shows them, {@code class/infiniband/<dev>/odp}) and
 * ib-core's read-only {@link UverbsObjects} (each context's PDs, MRs, QPs, CQs). Read-only:
 * nothing here opens a context, registers, maps, sends a firmware command or moves data. Every
 * method is safe from any thread (each service is).
 *
 * <p>A device or process that goes away between the listing and the read makes the read throw
 * {@link Gone}; the pages answer it with 404.
 */
@Component(service = ConsoleData.class)
public final class ConsoleData {

    /** Where the peer clients' statistics are ({@code PeerMemoryController.SYSFS_DIR}). */
    static final String MEMORY_PEERS = "kernel/infiniband/memory_peers";
    static final String CLASS_INFINIBAND = "class/infiniband";

    private final IbvDeviceList devices;
    private final Mm mm;
    private final Iommu iommu;
    private final Sysfs sysfs;
    private final UverbsObjects objects;

    @Activate
    public ConsoleData(@Reference IbvDeviceList devices, @Reference Mm mm, @Reference Iommu iommu, @Reference Sysfs sysfs,
            @Reference UverbsObjects objects) {
        this.objects = objects;
        this.devices = devices;
        this.mm = mm;
        this.iommu = iommu;
        this.sysfs = sysfs;
    }

    /** A thing asked for by name that does not exist (any more). */
    static final class Gone extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Gone(String what) {
            super(what);
        }
    }

    /** One port as {@code /sys/class/infiniband/<dev>/ports/<n>} shows it ({@code state} "4: ACTIVE"). */
    record Port(int port, String state, String physState, String rate, String linkLayer, String lid) {
    }

    /** A device with its ports, from the device list and ib-core's sysfs attributes. */
    record Device(String name, String driver, long nodeGuid, String fwVer, String hcaType, List<Port> ports) {
    }

    List<String> deviceNames() {
        return devices.devices().stream().filter(d -> !d.removed()).map(IbvDevice::name).toList();
    }

    /**
     * The device {@code name} with its ports, as {@code /sys/class/infiniband/<name>} shows them
     * (ib-core keeps each port's state from the driver's port events): reading it costs the device
     * nothing, no firmware command, no context.
     */
    Device device(String name) {
        IbvDevice d = devices.devices().stream().filter(x -> x.name().equals(name) && !x.removed()).findFirst()
                .orElseThrow(() -> new Gone("no RDMA device " + name));
        String dir = CLASS_INFINIBAND + "/" + name;
        List<Port> ports = new ArrayList<>();
        for (String p : sysfsPorts(name)) {
            String pd = dir + "/ports/" + p;
            ports.add(new Port(Integer.parseInt(p), attribute(pd + "/state"), attribute(pd + "/phys_state"), attribute(pd + "/rate"),
                    attribute(pd + "/link_layer"), attribute(pd + "/lid")));
        }
        if (d.removed()) {
            throw new Gone("RDMA device " + name + " went away");
        }
        return new Device(d.name(), d.driver(), d.nodeGuid(), attribute(dir + "/fw_ver"), attribute(dir + "/hca_type"), ports);
    }

    List<AddressSpace> processes() {
        return mm.processes();
    }

    AddressSpace process(int pid) {
        try {
            return mm.process(pid);
        } catch (KernelException e) {
            throw new Gone(e.getMessage());
        }
    }

    /** The verbs contexts of process {@code pid} (none for a process without one). */
    List<UverbsObjects.Context> contexts(int pid) {
        return objects.contexts().stream().filter(c -> c.pid() == pid).toList();
    }

    /** Every open context ({@code rdma resource show}). */
    List<UverbsObjects.Context> contexts() {
        return objects.contexts();
    }

    List<IommuDomain> domains() {
        return iommu.domains();
    }

    IommuAudit audit() {
        return iommu.audit();
    }

    /** The audit line of {@code kernel:iommu}. */
    String auditLine() {
        IommuAudit a = iommu.audit();
        return String.format("audit: faults=%d use_after_free=%d freed_while_mapped=%d live_mappings=%d leaked_at_destroy=%d -> %s",
                a.faults(), a.useAfterFree(), a.freedWhileMapped(), a.liveMappings(), iommu.leakedAtDestroy(),
                a.violationFree() ? "OK" : "VIOLATION");
    }

    List<String> peerClients() {
        return sysfs.isDirectory(MEMORY_PEERS) ? sysfs.list(MEMORY_PEERS) : List.of();
    }

    /** A peer client's statistics, as {@code /sys/kernel/infiniband/memory_peers/<name>/}. */
    Map<String, String> peerClient(String name) {
        return attributes(MEMORY_PEERS + "/" + name, "peer memory client " + name);
    }

    /** The devices with ODP counters ({@code class/infiniband/<dev>/odp}). */
    List<String> odpDevices() {
        if (!sysfs.isDirectory(CLASS_INFINIBAND)) {
            return List.of();
        }
        return sysfs.list(CLASS_INFINIBAND).stream().filter(d -> sysfs.isDirectory(CLASS_INFINIBAND + "/" + d + "/odp")).toList();
    }

    Map<String, String> odp(String device) {
        return attributes(CLASS_INFINIBAND + "/" + device + "/odp", "ODP counters of " + device);
    }

    /** The attributes of one sysfs directory, name to value (trimmed); {@link Gone} when it is not there (any more). */
    private Map<String, String> attributes(String dir, String what) {
        Map<String, String> out = new LinkedHashMap<>();
        try {
            if (!sysfs.isDirectory(dir)) {
                throw new Gone("no " + what);
            }
            for (String n : sysfs.list(dir)) {
                String path = dir + "/" + n;
                if (!sysfs.isDirectory(path)) {
                    out.put(n, sysfs.read(path).strip());
                }
            }
        } catch (RuntimeException e) {
            if (e instanceof Gone) {
                throw e;
            }
            // removed between list and read (the client unloaded, the device went away)
            throw new Gone("no " + what + " (" + e.getMessage() + ")");
        }
        return out;
    }

    /** The devices with attributes under {@code class/infiniband} (ib-core's sysfs: fw_ver, ports/N/...). */
    List<String> sysfsDevices() {
        if (!sysfs.isDirectory(CLASS_INFINIBAND)) {
            return List.of();
        }
        return sysfs.list(CLASS_INFINIBAND).stream().filter(d -> sysfs.exists(CLASS_INFINIBAND + "/" + d + "/fw_ver")).toList();
    }

    /** The port numbers under {@code class/infiniband/<dev>/ports}. */
    List<String> sysfsPorts(String device) {
        String d = CLASS_INFINIBAND + "/" + device + "/ports";
        return sysfs.isDirectory(d) ? sysfs.list(d).stream().filter(p -> p.matches("\\d+")).toList() : List.of();
    }

    /** The attribute files in sysfs folder {@code dir}, sorted; empty when it is absent. */
    List<String> files(String dir) {
        try {
            return sysfs.isDirectory(dir) ? sysfs.list(dir).stream().filter(f -> !sysfs.isDirectory(dir + "/" + f)).sorted().toList() : List.of();
        } catch (RuntimeException e) {
            return List.of(); // gone since the check
        }
    }

    /** Port {@code port} of {@code device}: its {@code counters/} then {@code hw_counters/} files, by name, as read now. */
    java.util.Map<String, String> portCounters(String device, String port) {
        java.util.Map<String, String> m = new java.util.LinkedHashMap<>();
        for (String folder : List.of("counters", "hw_counters")) {
            String dir = CLASS_INFINIBAND + "/" + device + "/ports/" + port + "/" + folder;
            for (String f : files(dir)) {
                m.put(folder + "/" + f, attribute(dir + "/" + f));
            }
        }
        return m;
    }

    /** An attribute's value, trimmed; "" when it is absent (gone since the listing). */
    String attribute(String path) {
        try {
            return sysfs.exists(path) ? sysfs.read(path).strip() : "";
        } catch (RuntimeException e) {
            return "";
        }
    }

    /** A counter of a sysfs attribute, 0 when it is absent or not a number. */
    long counter(String path) {
        try {
            return sysfs.exists(path) ? Long.parseLong(sysfs.read(path).strip()) : 0;
        } catch (RuntimeException e) {
            return 0;
        }
    }
}
