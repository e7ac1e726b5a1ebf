package org.peerdirect.doca.mmap;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code struct doca_mmap}: one memory range of the process, registered on every device added to
 * it, with the permissions it was given; or, created from an export, a range of another process
 * (another host) that this process reaches by RDMA.
 *
 * <p>Life cycle ({@code doca_mmap.h}): create → {@link #setMemrange} (mandatory, once),
 * {@link #setPermissions}, {@link #addDev}... → {@link #start} (one verbs MR per device, its access
 * the permissions: the device, not this library, enforces them) → {@link #exportRdma} /
 * {@link #exportPci} → {@link #destroy} (which stops: the MRs are deregistered, so every key an
 * export handed out stops working). While started, nothing can be set, added or removed; a
 * {@link #stop}ped map can be configured again (but its range, which is set once).
 *
 * <p>The DPA forms ({@link #setDpaMemrange}, {@link #devGetDpaHandle}) answer
 * DOCA_ERROR_NOT_SUPPORTED unless a DOCA DPA context provides DPA memory (or, for a host range's
 * handle, a started DOCA DPA context is on the device). Not thread-safe.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core: memory subsystem</a>
 */
public final class DocaMmap {

    /** The default and the bound of {@link #setMaxNumDevices} [model: DOCA's are not public]. */
    public static final int DEFAULT_MAX_NUM_DEVICES = 16;

    /** {@code doca_mmap_get_memrange}'s two out-parameters. */
    public record Memrange(long addr, long len) {
    }

    private static final AtomicLong EXPORT_IDS = new AtomicLong();

    private final long id = EXPORT_IDS.incrementAndGet();
    private long addr;
    private long len;
    private boolean memrangeSet;
    private int permissions = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_ONLY;
    private int maxNumDevices = DEFAULT_MAX_NUM_DEVICES;
    private long userData;
    private boolean started;
    private boolean everStarted;
    private boolean exported;
    private boolean destroyed;
    /** Devices in the order added; their MR while started (null before start and after stop). */
    private final Map<DocaDev, IbvMr> devs = new LinkedHashMap<>();
    /** The DPA context of a DPA memory range ({@link #setDpaMemrange}), and its mkey's key while started (0 otherwise). */
    private DocaDpaContext dpa;
    private int dpaKey;
    /** A host map's DPA handle ({@link #hostDpaHandle}) and the DPA context it is of; 0 and null when none. */
    private int hostDpaKey;
    private DocaDpaContext hostDpa;
    /** Non-null for a map created from an export: the descriptor it was made of. */
    private final MmapExportDesc imported;
    private final DocaDev importer;

    private DocaMmap(MmapExportDesc imported, DocaDev importer) {
        this.imported = imported;
        this.importer = importer;
    }

    /** {@code doca_mmap_create}: an empty map, permissions LOCAL_READ_ONLY [model: the default is not public]. */
    public static DocaMmap create() {
        return new DocaMmap(null, null);
    }

    /**
     * {@code doca_mmap_create_from_export}: a map of the range {@code exportDesc} describes,
     * reached through {@code dev} (RDMA: any device connected to the exporter's; PCI: a device on
     * the same PCI device, the exporter's node GUID [model]). It is started from creation and can be
     * neither configured nor exported.
     *
     * @throws DocaException DOCA_ERROR_INVALID_VALUE for a malformed descriptor or a closed device,
     *         DOCA_ERROR_NOT_PERMITTED for a PCI export imported on another device
     */
    public static DocaMmap createFromExport(long userData, byte[] exportDesc, DocaDev dev) {
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_mmap_create_from_export: null device");
        dev.checkOpen("doca_mmap_create_from_export");
        MmapExportDesc d = MmapExportDesc.parse(exportDesc);
        if (d.kind() == MmapExportDesc.KIND_PCI) {
            DocaException.check(d.nodeGuid() == dev.asDevinfo().ibvDevice().nodeGuid(), DocaError.DOCA_ERROR_NOT_PERMITTED,
                    String.format("doca_mmap_create_from_export: a PCI export of device GUID %016x cannot be imported on %s (GUID %016x)",
                            d.nodeGuid(), dev.name(), dev.asDevinfo().ibvDevice().nodeGuid()));
        }
        DocaMmap m = new DocaMmap(d, dev);
        m.userData = userData;
        m.addr = d.addr();
        m.len = d.len();
        m.memrangeSet = true;
        m.permissions = d.permissions();
        m.started = true;
        m.everStarted = true;
        dev.hold(m);
        return m;
    }

    /**
     * {@code doca_mmap_set_memrange}: the range [addr, addr + len) of the devices' process.
     *
     * @throws DocaException INVALID_VALUE (zero length, wraps), BAD_STATE (started), NOT_PERMITTED
     *         (set before, or created from an export)
     */
    public void setMemrange(long addr, long len) {
        checkConfigurable("doca_mmap_set_memrange");
        DocaException.check(!memrangeSet, DocaError.DOCA_ERROR_NOT_PERMITTED, "doca_mmap_set_memrange: the memory range was set before");
        DocaException.check(len > 0 && Long.compareUnsigned(addr + len - 1, addr) >= 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                String.format("doca_mmap_set_memrange: [0x%x, +%d) is empty or overflows", addr, len));
        this.addr = addr;
        this.len = len;
        memrangeSet = true;
    }

    /**
     * {@code doca_mmap_set_dpa_memrange}: a range of DPA heap memory. The state checks are DOCA's;
     * then DOCA_ERROR_NOT_SUPPORTED: DPA memory comes with DOCA DPA on FlexIO.
     */
    public void setDpaMemrange(DocaDpaContext dpa, long dpaAddr, long len) {
        checkConfigurable("doca_mmap_set_dpa_memrange");
        DocaException.check(dpa != null && len > 0, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_mmap_set_dpa_memrange: null DPA or empty range");
        DocaException.check(!memrangeSet, DocaError.DOCA_ERROR_NOT_PERMITTED, "doca_mmap_set_dpa_memrange: the memory range was set before");
        DocaException.check(dpa.hasDpaMemory(), DocaError.DOCA_ERROR_NOT_SUPPORTED, "doca_mmap_set_dpa_memrange: the DPA context has no DPA memory");
        this.addr = dpaAddr;
        this.len = len;
        memrangeSet = true;
        this.dpa = dpa;
    }

    /** {@code doca_mmap_get_memrange}; BAD_STATE when it was never set. */
    public Memrange getMemrange() {
        checkAlive("doca_mmap_get_memrange");
        DocaException.check(memrangeSet, DocaError.DOCA_ERROR_BAD_STATE, "doca_mmap_get_memrange: the memory range was never set");
        return new Memrange(addr, len);
    }

    /**
     * {@code doca_mmap_set_permissions}: a {@link DocaAccessFlag} mask.
     *
     * @throws DocaException INVALID_VALUE (undefined bit, invalid combination), BAD_STATE (started)
     */
    public void setPermissions(int accessMask) {
        checkConfigurable("doca_mmap_set_permissions");
        DocaAccessFlag.toIbAccess(accessMask); // validates
        permissions = accessMask;
    }

    /** The permission mask (of the exporter's map, for one created from an export). */
    public int getPermissions() {
        checkAlive("doca_mmap get permissions");
        return permissions;
    }

    /** {@code doca_mmap_set_max_num_devices}; NOT_PERMITTED after the first start. */
    public void setMaxNumDevices(int max) {
        checkAlive("doca_mmap_set_max_num_devices");
        DocaException.check(max > 0, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_mmap_set_max_num_devices: " + max);
        DocaException.check(!everStarted, DocaError.DOCA_ERROR_NOT_PERMITTED, "doca_mmap_set_max_num_devices: the map was started before");
        DocaException.check(max >= devs.size(), DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_mmap_set_max_num_devices: " + max + " is below the " + devs.size() + " devices added");
        maxNumDevices = max;
    }

    /** {@code doca_mmap_get_max_num_devices}. */
    public int getMaxNumDevices() {
        return maxNumDevices;
    }

    /** {@code doca_mmap_set_user_data}; BAD_STATE while started. */
    public void setUserData(long data) {
        checkAlive("doca_mmap_set_user_data");
        DocaException.check(!started, DocaError.DOCA_ERROR_BAD_STATE, "doca_mmap_set_user_data: the map is started");
        userData = data;
    }

    /** {@code doca_mmap_get_user_data}. */
    public long getUserData() {
        return userData;
    }

    /**
     * {@code doca_mmap_add_dev}.
     *
     * @throws DocaException NOT_PERMITTED (started or from export), ALREADY_EXIST, NO_MEMORY (at
     *         the maximum number of devices), INVALID_VALUE (null or closed device)
     */
    public void addDev(DocaDev dev) {
        checkAlive("doca_mmap_add_dev");
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_mmap_add_dev: null device");
        dev.checkOpen("doca_mmap_add_dev");
        DocaException.check(imported == null && !started, DocaError.DOCA_ERROR_NOT_PERMITTED,
                "doca_mmap_add_dev: the map is " + (started ? "started" : "created from an export"));
        DocaException.check(!devs.containsKey(dev), DocaError.DOCA_ERROR_ALREADY_EXIST, "doca_mmap_add_dev: " + dev.name() + " was added before");
        DocaException.check(devs.size() < maxNumDevices, DocaError.DOCA_ERROR_NO_MEMORY,
                "doca_mmap_add_dev: the map has its maximum of " + maxNumDevices + " devices");
        dev.hold(this);
        devs.put(dev, null);
    }

    /** {@code doca_mmap_rm_dev}: NOT_PERMITTED (started or from export), NOT_FOUND. */
    public void rmDev(DocaDev dev) {
        checkAlive("doca_mmap_rm_dev");
        DocaException.check(imported == null && !started, DocaError.DOCA_ERROR_NOT_PERMITTED,
                "doca_mmap_rm_dev: the map is " + (started ? "started" : "created from an export"));
        DocaException.check(dev != null && devs.containsKey(dev), DocaError.DOCA_ERROR_NOT_FOUND, "doca_mmap_rm_dev: " + dev + " is not in the map");
        devs.remove(dev);
        dev.unhold(this);
    }

    /**
     * {@code doca_mmap_start}: registers the range on every device added (one verbs MR each, in
     * the device's PD, with the access the permissions give).
     *
     * @throws DocaException BAD_STATE (no memory range [closest: DOCA lists no status for it], or
     *         started already), NOT_PERMITTED (from export), INVALID_VALUE (devices of different
     *         processes, a range not mapped), NO_MEMORY (registration out of memory or memlock)
     */
    public void start() {
        checkAlive("doca_mmap_start");
        DocaException.check(imported == null, DocaError.DOCA_ERROR_NOT_PERMITTED, "doca_mmap_start: the map was created from an export");
        DocaException.check(!started, DocaError.DOCA_ERROR_BAD_STATE, "doca_mmap_start: the map is started already");
        DocaException.check(memrangeSet, DocaError.DOCA_ERROR_BAD_STATE, "doca_mmap_start: no memory range set (doca_mmap_set_memrange)");
        if (dpa != null) { // DPA memory: one mkey of the DPA context, on its device only
            DocaException.check(devs.keySet().stream().allMatch(d -> d == dpa.dev()), DocaError.DOCA_ERROR_INVALID_VALUE,
                    "doca_mmap_start: a DPA memory range is reached through its DPA context's device " + dpa.dev().name() + " only, not " + devs.keySet());
            dpaKey = dpa.dpaMkeyCreate(addr, len);
            started = true;
            everStarted = true;
            return;
        }
        int access = DocaAccessFlag.toIbAccess(permissions);
        List<DocaDev> done = new ArrayList<>();
        try {
            for (DocaDev d : devs.keySet()) {
                d.checkOpen("doca_mmap_start");
                DocaException.check(d.process() == devs.keySet().iterator().next().process(), DocaError.DOCA_ERROR_INVALID_VALUE,
                        "doca_mmap_start: devices of different processes in one map (" + devs.keySet() + ")");
                try {
                    devs.put(d, d.rdmaBridgeGetDevPd().regMr(addr, len, access));
                } catch (KernelException e) {
                    throw DocaException.ofErrno(String.format("doca_mmap_start: registering [0x%x, +%d) on %s", addr, len, d.name()), e);
                }
                done.add(d);
            }
        } catch (RuntimeException e) {
            for (DocaDev d : done) {
                devs.put(d, null).dereg();
            }
            throw e;
        }
        started = true;
        everStarted = true;
    }

    /**
     * {@code doca_mmap_stop}: deregisters the MRs; the map can be configured again.
     *
     * @throws DocaException NOT_PERMITTED (exported or from export: destroy it), BAD_STATE (not started)
     */
    public void stop() {
        checkAlive("doca_mmap_stop");
        DocaException.check(imported == null && !exported, DocaError.DOCA_ERROR_NOT_PERMITTED,
                "doca_mmap_stop: the map was " + (exported ? "exported" : "created from an export") + "; destroy it instead");
        DocaException.check(started, DocaError.DOCA_ERROR_BAD_STATE, "doca_mmap_stop: the map is not started");
        deregister();
    }

    /**
     * {@code doca_mmap_destroy}: stops the map (its MRs deregistered: keys exported are dead from
     * here on) and releases its devices. A second destroy is INVALID_VALUE.
     */
    public void destroy() {
        checkAlive("doca_mmap_destroy");
        destroyed = true;
        if (imported != null) {
            importer.unhold(this);
            return;
        }
        try {
            deregister();
        } finally { // a deregistration that failed (the device went) still releases the devices
            for (DocaDev d : devs.keySet()) {
                d.unhold(this);
            }
            devs.clear();
        }
    }

    private void deregister() {
        RuntimeException first = null;
        if (dpaKey != 0) {
            int k = dpaKey;
            dpaKey = 0;
            dpa.dpaMkeyDestroy(k);
        }
        if (hostDpaKey != 0) {
            int k = hostDpaKey;
            hostDpaKey = 0;
            hostDpa.dpaMkeyDestroy(k); // nothing once that context stopped: the key went with its process
            hostDpa = null;
        }
        for (Map.Entry<DocaDev, IbvMr> e : devs.entrySet()) {
            IbvMr mr = e.getValue();
            e.setValue(null);
            if (mr != null) {
                try {
                    mr.dereg();
                } catch (KernelException x) {
                    first = first == null ? DocaException.ofErrno("doca_mmap: deregistering on " + e.getKey().name(), x) : first;
                }
            }
        }
        started = false;
        if (first != null) {
            throw first;
        }
    }

    /**
     * {@code doca_mmap_export_rdma}: a descriptor carrying the range and {@code dev}'s rkey.
     *
     * @throws DocaException NOT_PERMITTED (not started, from export, no RDMA permission), NOT_FOUND (device not in the map)
     */
    public byte[] exportRdma(DocaDev dev) {
        return export("doca_mmap_export_rdma", dev, DocaAccessFlag.RDMA_ANY, MmapExportDesc.KIND_RDMA);
    }

    /**
     * {@code doca_mmap_export_pci}: a descriptor for a device on the same PCI device, carrying
     * {@code dev}'s lkey.
     *
     * @throws DocaException NOT_PERMITTED (not started, from export, no PCI permission), NOT_FOUND (device not in the map)
     */
    public byte[] exportPci(DocaDev dev) {
        return export("doca_mmap_export_pci", dev, DocaAccessFlag.PCI_ANY, MmapExportDesc.KIND_PCI);
    }

    private byte[] export(String what, DocaDev dev, int needs, int kind) {
        checkAlive(what);
        DocaException.check(imported == null, DocaError.DOCA_ERROR_NOT_PERMITTED, what + ": the map was created from an export");
        DocaException.check(started, DocaError.DOCA_ERROR_NOT_PERMITTED, what + ": the map is not started");
        DocaException.check(dev != null && devs.containsKey(dev), DocaError.DOCA_ERROR_NOT_FOUND, what + ": " + dev + " is not in the map");
        DocaException.check((permissions & needs) != 0, DocaError.DOCA_ERROR_NOT_PERMITTED,
                what + ": the map's permissions " + DocaAccessFlag.toString(permissions) + " have no " + DocaAccessFlag.toString(needs));
        IbvMr mr = devs.get(dev);
        exported = true;
        int key = dpaKey != 0 ? dpaKey : kind == MmapExportDesc.KIND_RDMA ? mr.rkey() : mr.lkey();
        return new MmapExportDesc(kind, permissions, key, addr, len,
                dev.asDevinfo().ibvDevice().nodeGuid(), id, dev.process().pid()).toBytes();
    }

    /**
     * {@code doca_mmap_dev_get_dpa_handle}: the state checks are DOCA's; then the key of a DPA
     * memory range, or of a host range for a started DOCA DPA context on {@code dev}
     * (NOT_SUPPORTED without one).
     */
    public int devGetDpaHandle(DocaDev dev) {
        checkAlive("doca_mmap_dev_get_dpa_handle");
        DocaException.check(started, DocaError.DOCA_ERROR_NOT_PERMITTED, "doca_mmap_dev_get_dpa_handle: the map is not started");
        DocaException.check(dev != null && (devs.containsKey(dev) || dev == importer), DocaError.DOCA_ERROR_NOT_FOUND,
                "doca_mmap_dev_get_dpa_handle: " + dev + " is not in the map");
        if (imported != null) { // the exporter's key: what a DPA post names to reach the remote range
            return imported.key();
        }
        if (dpaKey != 0) {
            return dpaKey;
        }
        return hostDpaHandle(dev);
    }

    /**
     * A map of host memory's DPA handle [model]: its MR is on the device's PD, which the DPA
     * process's queues cannot use, so the handle is a second key over the range, of the DPA
     * process's PD, writable only when the permissions allow a write (LOCAL_READ_WRITE or
     * RDMA_WRITE); made once, for the first started DOCA DPA context on {@code dev}, and gone at
     * stop or when that context stops. NOT_SUPPORTED when no DPA context on {@code dev} is started.
     */
    private int hostDpaHandle(DocaDev dev) {
        String w = "doca_mmap_dev_get_dpa_handle";
        if (hostDpaKey != 0) {
            if (hostDpa.dpaStarted()) {
                return hostDpaKey;
            }
            hostDpa.dpaMkeyDestroy(hostDpaKey); // its context stopped: the key went with the process
            hostDpaKey = 0;
        }
        // the started DOCA DPA contexts on dev, in the order they took it [model: what a host map's DPA handle is made for]
        List<DocaDpaContext> ctxs = dev.holders(DocaDpaContext.class).stream().filter(DocaDpaContext::dpaStarted).toList();
        DocaException.check(!ctxs.isEmpty(), DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": no DOCA DPA context is started on " + dev.name() + " (a map of host memory gets its DPA handle from one)");
        boolean writable = (permissions & (DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE)) != 0;
        hostDpa = ctxs.get(0);
        hostDpaKey = hostDpa.dpaHostMkeyCreate(addr, len, writable);
        return hostDpaKey;
    }

    /** {@code doca_mmap_get_exported}. */
    public boolean getExported() {
        return exported;
    }

    /** {@code doca_mmap_get_from_export}. */
    public boolean getFromExport() {
        return imported != null;
    }

    /** {@code doca_mmap_get_num_bufs}: always 0 here (no {@code doca_buf} in this subset). */
    public int getNumBufs() {
        return 0;
    }

    /**
     * The local key of the started map on {@code dev}: what DOCA's data paths (doca_buf, doca_rdma)
     * put in their work requests. Not a public DOCA call [model].
     */
    public int lkey(DocaDev dev) {
        return mr("doca_mmap lkey", dev).lkey();
    }

    /** The remote key of the started map on {@code dev} (what {@link #exportRdma} hands out) [model]. */
    public int rkey(DocaDev dev) {
        return mr("doca_mmap rkey", dev).rkey();
    }

    /**
     * The key of a map created from an export: the exporter's rkey (RDMA) or lkey (PCI), what a
     * local work request names to reach the remote range [model].
     */
    public int remoteKey() {
        checkAlive("doca_mmap remote key");
        DocaException.check(imported != null, DocaError.DOCA_ERROR_NOT_PERMITTED, "doca_mmap remote key: the map is not created from an export");
        return imported.key();
    }

    /** {@code doca_mmap_cap_is_export_pci_supported}: every device of this model [model]. */
    public static boolean capIsExportPciSupported(DocaDevinfo devinfo) {
        DocaException.check(devinfo != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_mmap_cap_is_export_pci_supported: null devinfo");
        return true;
    }

    /** {@code doca_mmap_cap_is_create_from_export_pci_supported}: every device of this model [model]. */
    public static boolean capIsCreateFromExportPciSupported(DocaDevinfo devinfo) {
        DocaException.check(devinfo != null, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_mmap_cap_is_create_from_export_pci_supported: null devinfo");
        return true;
    }

    private IbvMr mr(String what, DocaDev dev) {
        checkAlive(what);
        DocaException.check(started && imported == null, DocaError.DOCA_ERROR_BAD_STATE, what + ": the map is not a started local map");
        IbvMr mr = devs.get(dev);
        DocaException.check(mr != null, DocaError.DOCA_ERROR_NOT_FOUND, what + ": " + dev + " is not in the map");
        return mr;
    }

    private void checkAlive(String what) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": the map was destroyed");
    }

    private void checkConfigurable(String what) {
        checkAlive(what);
        DocaException.check(imported == null, DocaError.DOCA_ERROR_NOT_PERMITTED, what + ": the map was created from an export");
        DocaException.check(!started, DocaError.DOCA_ERROR_BAD_STATE, what + ": the map is started");
    }

    @Override
    public String toString() {
        return String.format("doca_mmap %d [0x%x, +%d) %s%s%s", id, addr, len, DocaAccessFlag.toString(permissions),
                imported != null ? " from export" : started ? " started on " + devs.keySet().stream().map(DocaDev::name).toList() : "",
                destroyed ? " destroyed" : "");
    }
}
