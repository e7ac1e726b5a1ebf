package org.peerdirect.doca;

import org.peerdirect.ib.core.umem.IbAccess;

/**
 * {@code enum doca_access_flag} ({@code doca_types.h}): who may reach a memory range, set with
 * {@code doca_mmap_set_permissions}. The memory is always readable by a local device. The values
 * are DOCA's.
 */
public final class DocaAccessFlag {

    /** Read by a local device, no write. */
    public static final int DOCA_ACCESS_FLAG_LOCAL_READ_ONLY = 0;
    /** Read and write by a local device. */
    public static final int DOCA_ACCESS_FLAG_LOCAL_READ_WRITE = 1;
    /** Read by a remote device through RDMA. */
    public static final int DOCA_ACCESS_FLAG_RDMA_READ = 1 << 1;
    /** Write by a remote device through RDMA. */
    public static final int DOCA_ACCESS_FLAG_RDMA_WRITE = 1 << 2;
    /** Atomics by a remote device through RDMA. */
    public static final int DOCA_ACCESS_FLAG_RDMA_ATOMIC = 1 << 3;
    /** Read by a device on the same PCI (see {@code doca_mmap_export_pci}), no write. */
    public static final int DOCA_ACCESS_FLAG_PCI_READ_ONLY = 1 << 4;
    /** Read and write by a device on the same PCI. */
    public static final int DOCA_ACCESS_FLAG_PCI_READ_WRITE = 1 << 5;
    /** The system may reorder accesses to the memory. */
    public static final int DOCA_ACCESS_FLAG_PCI_RELAXED_ORDERING = 1 << 6;

    /** Every defined bit. */
    public static final int ALL = (1 << 7) - 1;
    /** The bits that let a remote peer in over RDMA ({@code doca_mmap_export_rdma} needs one). */
    public static final int RDMA_ANY = DOCA_ACCESS_FLAG_RDMA_READ | DOCA_ACCESS_FLAG_RDMA_WRITE | DOCA_ACCESS_FLAG_RDMA_ATOMIC;
    /** The bits that let a device on the same PCI in ({@code doca_mmap_export_pci} needs one). */
    public static final int PCI_ANY = DOCA_ACCESS_FLAG_PCI_READ_ONLY | DOCA_ACCESS_FLAG_PCI_READ_WRITE;

    private DocaAccessFlag() {
    }

    /**
     * The verbs access ({@link IbAccess}) of the MR a memory map registers for {@code mask}.
     * [model] The verbs require LOCAL_WRITE beside REMOTE_WRITE and REMOTE_ATOMIC
     * ({@code ib_check_mr_access}), so RDMA write and atomic permissions imply local write here;
     * PCI read-write is local write (the peer on the same PCI uses the local key).
     *
     * @throws DocaException DOCA_ERROR_INVALID_VALUE for an undefined bit or both PCI read-only and PCI read-write
     */
    public static int toIbAccess(int mask) {
        DocaException.check((mask & ~ALL) == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                String.format("access mask 0x%x has undefined bits 0x%x", mask, mask & ~ALL));
        DocaException.check((mask & PCI_ANY) != PCI_ANY, DocaError.DOCA_ERROR_INVALID_VALUE,
                "PCI_READ_ONLY and PCI_READ_WRITE are mutually exclusive");
        int a = 0;
        if ((mask & (DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DOCA_ACCESS_FLAG_PCI_READ_WRITE | DOCA_ACCESS_FLAG_RDMA_WRITE
                | DOCA_ACCESS_FLAG_RDMA_ATOMIC)) != 0) {
            a |= IbAccess.LOCAL_WRITE;
        }
        if ((mask & DOCA_ACCESS_FLAG_RDMA_READ) != 0) {
            a |= IbAccess.REMOTE_READ;
        }
        if ((mask & DOCA_ACCESS_FLAG_RDMA_WRITE) != 0) {
            a |= IbAccess.REMOTE_WRITE;
        }
        if ((mask & DOCA_ACCESS_FLAG_RDMA_ATOMIC) != 0) {
            a |= IbAccess.REMOTE_ATOMIC;
        }
        if ((mask & DOCA_ACCESS_FLAG_PCI_RELAXED_ORDERING) != 0) {
            a |= IbAccess.RELAXED_ORDERING;
        }
        return a;
    }

    /** The flags of {@code mask} by name, e.g. {@code LOCAL_READ_WRITE|RDMA_WRITE}. */
    public static String toString(int mask) {
        String[] names = {"LOCAL_READ_WRITE", "RDMA_READ", "RDMA_WRITE", "RDMA_ATOMIC", "PCI_READ_ONLY", "PCI_READ_WRITE",
            "PCI_RELAXED_ORDERING"};
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < names.length; i++) {
            if ((mask & (1 << i)) != 0) {
                sb.append(sb.isEmpty() ? "" : "|").append(names[i]);
            }
        }
        return sb.isEmpty() ? "LOCAL_READ_ONLY" : sb.toString();
    }
}
