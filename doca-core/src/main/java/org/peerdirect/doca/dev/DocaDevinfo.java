package org.peerdirect.doca.dev;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code struct doca_devinfo}: what a process learns of a local device before it opens it, one per
 * RDMA device of the verbs device list. In C the process is implicit; here {@link #createList}
 * takes it, and {@link DocaDev#open} opens the device in that process. A devinfo holds no
 * resource; the queries that need the device ({@link #getLid}, {@link #queryDevice}) open a verbs
 * context for the call and close it. Not thread-safe.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core: device handling</a>
 */
public final class DocaDevinfo {

    /** {@code DOCA_DEVINFO_PCI_ADDR_SIZE}: "XXXX:XX:XX.X" and its NUL. */
    public static final int DOCA_DEVINFO_PCI_ADDR_SIZE = 13;
    /** {@code DOCA_DEVINFO_IBDEV_NAME_SIZE}. */
    public static final int DOCA_DEVINFO_IBDEV_NAME_SIZE = 64;

    /** Domain:bus:device.function, the domain optional (DOCA accepts "03:00.0" and "0000:03:00.0"). */
    private static final Pattern BDF = Pattern.compile("(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-1][0-9a-fA-F])\\.([0-7])");

    private final AddressSpace process;
    private final IbvDevice device;
    private final String pciAddr;
    /** The device this devinfo opened and has not closed yet: a second open returns it (doca_dev_open's note). */
    DocaDev opened;

    private DocaDevinfo(AddressSpace process, IbvDevice device, String pciAddr) {
        this.process = process;
        this.device = device;
        this.pciAddr = pciAddr;
    }

    /**
     * {@code doca_devinfo_create_list}: one devinfo per device of {@code devices} not removed, for
     * {@code process}; {@code pciAddrOf} gives each device's PCI address ("0000:03:00.0"; the verbs
     * device does not carry it: the provider's {@code pci.bdf} service property or the test's PCI
     * function does), null where unknown.
     */
    public static List<DocaDevinfo> createList(AddressSpace process, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf) {
        DocaException.check(process != null && devices != null && pciAddrOf != null, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_devinfo_create_list: null argument");
        DocaException.check(!process.exited(), DocaError.DOCA_ERROR_INVALID_VALUE, "doca_devinfo_create_list: " + process + " has exited");
        List<DocaDevinfo> list = new ArrayList<>();
        for (IbvDevice d : devices.devices()) {
            if (!d.removed()) {
                String pci = pciAddrOf.apply(d);
                list.add(new DocaDevinfo(process, d, pci == null ? null : normalise(pci, "doca_devinfo_create_list")));
            }
        }
        return List.copyOf(list);
    }

    /**
     * The PCI addresses in a running container: the {@code pci.bdf} property the drivers (mlx4,
     * mlx5) register their provider service ({@code IbDeviceOps}, named by {@code ib.device.name})
     * with; null for a device whose driver gives none. For {@link #createList} inside OSGi.
     */
    public static Function<IbvDevice, String> pciAddrOfServices(BundleContext ctx) {
        Objects.requireNonNull(ctx, "ctx");
        return d -> {
            try {
                ServiceReference<?>[] refs = ctx.getServiceReferences(PROVIDER_SERVICE, "(ib.device.name=" + d.name() + ")");
                Object bdf = refs == null || refs.length == 0 ? null : refs[0].getProperty("pci.bdf");
                return bdf instanceof String s ? s : null;
            } catch (InvalidSyntaxException e) {
                return null; // a device name a filter cannot hold: no address known
            }
        };
    }

    /** The provider SPI's service interface, by name: doca-core does not import the driver side. */
    static final String PROVIDER_SERVICE = "org.peerdirect.ib.core.provider.IbDeviceOps";

    /**
     * {@code doca_devinfo_destroy_list}: the list goes; devices opened from it stay open until
     * closed (as in DOCA). Nothing to free here; kept for the call order of C programs.
     */
    public static void destroyList(List<DocaDevinfo> list) {
        DocaException.check(list != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_devinfo_destroy_list: null list");
    }

    /** {@code doca_devinfo_get_ibdev_name}, e.g. {@code mlx5_0}. */
    public String getIbdevName() {
        return device.name();
    }

    /**
     * {@code doca_devinfo_get_pci_addr_str}: "XXXX:XX:XX.X".
     *
     * @throws DocaException DOCA_ERROR_NOT_SUPPORTED when the list was built without this device's address [model]
     */
    public String getPciAddrStr() {
        DocaException.check(pciAddr != null, DocaError.DOCA_ERROR_NOT_SUPPORTED,
                "doca_devinfo_get_pci_addr_str: no PCI address known for " + device.name());
        return pciAddr;
    }

    /**
     * {@code doca_devinfo_is_equal_pci_addr}: whether this device sits at {@code pciAddr}
     * ("XXXX:XX:XX.X" or "XX:XX.X", hex digits in either case).
     *
     * @throws DocaException DOCA_ERROR_INVALID_VALUE for an address not of that form
     */
    public boolean isEqualPciAddr(String pciAddr) {
        String want = normalise(pciAddr, "doca_devinfo_is_equal_pci_addr");
        return want.equals(this.pciAddr);
    }

    /** {@code doca_devinfo_get_lid}: the LID of port 1 (0 on an Ethernet port). */
    public int getLid() {
        return query("doca_devinfo_get_lid", c -> c.queryPort(1)).lid();
    }

    /** Whether port 1 is Ethernet (RoCE) rather than InfiniBand. */
    public boolean isEthernet() {
        return query("doca_devinfo_get_lid", c -> c.queryPort(1)).linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET;
    }

    /**
     * The device's verbs attributes ({@code ibv_query_device_ex}): the capability source DOCA's
     * {@code *_cap_*} queries read (vendor part id 41692 is a BlueField-3, for DOCA DPA's
     * {@code doca_dpa_cap_is_supported}).
     */
    public IbvDeviceAttr queryDevice() {
        return query("doca_devinfo capability query", IbvContext::queryDeviceEx);
    }

    /** The verbs device behind this devinfo (what DOCA's RDMA bridge reaches). */
    public IbvDevice ibvDevice() {
        return device;
    }

    /** The process this devinfo was listed for; {@link DocaDev#open} opens the device there. */
    public AddressSpace process() {
        return process;
    }

    private <T> T query(String what, Function<IbvContext, T> q) {
        try (IbvContext c = device.open(process)) {
            return q.apply(c);
        } catch (KernelException e) {
            throw DocaException.ofErrno(what + " on " + device.name(), e);
        }
    }

    static String normalise(String pci, String what) {
        DocaException.check(pci != null, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": null PCI address");
        Matcher m = BDF.matcher(pci.trim());
        DocaException.check(m.matches(), DocaError.DOCA_ERROR_INVALID_VALUE,
                what + ": '" + pci + "' is not a PCI address of the form XXXX:XX:XX.X or XX:XX.X");
        String domain = m.group(1) == null ? "0000" : m.group(1);
        return (domain + ":" + m.group(2) + ":" + m.group(3) + "." + m.group(4)).toLowerCase(Locale.ROOT);
    }

    @Override
    public String toString() {
        return "doca_devinfo " + device.name() + (pciAddr == null ? "" : " (" + pciAddr + ")") + " for " + process;
    }

    /** The list's devinfo named {@code ibdevName}; DOCA_ERROR_NOT_FOUND naming the list's devices otherwise. */
    public static DocaDevinfo byIbdevName(List<DocaDevinfo> list, String ibdevName) {
        Objects.requireNonNull(list, "list");
        return list.stream().filter(i -> i.getIbdevName().equals(ibdevName)).findFirst()
                .orElseThrow(() -> new DocaException(DocaError.DOCA_ERROR_NOT_FOUND, "no device named " + ibdevName + " among "
                        + list.stream().map(DocaDevinfo::getIbdevName).toList()));
    }

    /** The list's devinfo at {@code pciAddr}; DOCA_ERROR_NOT_FOUND otherwise. */
    public static DocaDevinfo byPciAddr(List<DocaDevinfo> list, String pciAddr) {
        Objects.requireNonNull(list, "list");
        return list.stream().filter(i -> i.isEqualPciAddr(pciAddr)).findFirst()
                .orElseThrow(() -> new DocaException(DocaError.DOCA_ERROR_NOT_FOUND, "no device at PCI address " + pciAddr + " among "
                        + list.stream().map(i -> i.getIbdevName() + "=" + i.pciAddr).toList()));
    }
}
