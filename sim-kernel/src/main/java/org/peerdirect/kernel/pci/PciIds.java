package org.peerdirect.kernel.pci;

/**
 * Vendor ids of {@code include/linux/pci_ids.h}, for drivers' match filters and models' config
 * space. Device ids belong to each driver's own table (as {@code mlx5_core_pci_table} and
 * {@code nvme_id_table} keep theirs). A driver's filter is built from these constants, in hex as
 * the kernel writes them; the service properties are integers, so the filter's text (decimal) is
 * the compiler's concatenation of the constants, e.g.
 * {@code "(&(pci.vendor=" + PCI_VENDOR_ID_MELLANOX + ")(pci.device=" + DEVICE + "))"}.
 *
 * @since 0.11
 */
public final class PciIds {
    /** {@code PCI_VENDOR_ID_MELLANOX}. */
    public static final int PCI_VENDOR_ID_MELLANOX = 0x15b3;
    /** {@code PCI_VENDOR_ID_NVIDIA}. */
    public static final int PCI_VENDOR_ID_NVIDIA = 0x10de;
    /** {@code PCI_VENDOR_ID_SAMSUNG}. */
    public static final int PCI_VENDOR_ID_SAMSUNG = 0x144d;

    private PciIds() {
    }
}
