package org.peerdirect.ib.core.umem;

/** {@code enum ib_access_flags}: the access rights of a registration (values as in ib_verbs.h). */
public final class IbAccess {

    public static final int LOCAL_WRITE = 1;
    public static final int REMOTE_WRITE = 1 << 1;
    public static final int REMOTE_READ = 1 << 2;
    public static final int REMOTE_ATOMIC = 1 << 3;
    public static final int MW_BIND = 1 << 4;
    public static final int ZERO_BASED = 1 << 5;
    public static final int ON_DEMAND = 1 << 6;
    public static final int HUGETLB = 1 << 7;
    /** {@code IB_ACCESS_FLUSH_GLOBAL}: remote RDMA FLUSH with the global-visibility placement type (MRs and QPs). @since 0.5 */
    public static final int FLUSH_GLOBAL = 1 << 8;
    /**
     * {@code IB_ACCESS_FLUSH_PERSISTENT}: remote RDMA FLUSH with the persistence placement type;
     * a driver grants it on an MR only over persistent memory (rxe: EINVAL otherwise). @since 0.5
     */
    public static final int FLUSH_PERSISTENT = 1 << 9;
    public static final int RELAXED_ORDERING = 1 << 20;
    /** Every flag this stack knows. */
    public static final int SUPPORTED = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | MW_BIND | ZERO_BASED
            | ON_DEMAND | HUGETLB | FLUSH_GLOBAL | FLUSH_PERSISTENT | RELAXED_ORDERING;

    private IbAccess() {
    }

    /** {@code ib_access_writable}: does the device write through this registration? */
    public static boolean writable(int access) {
        return (access & (LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND)) != 0;
    }

    /** The flags by name, e.g. {@code LOCAL_WRITE|REMOTE_READ}. */
    public static String toString(int access) {
        String[] names = {"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC", "MW_BIND", "ZERO_BASED", "ON_DEMAND", "HUGETLB", "FLUSH_GLOBAL", "FLUSH_PERSISTENT"};
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < names.length; i++) {
            if ((access & (1 << i)) != 0) {
                sb.append(sb.isEmpty() ? "" : "|").append(names[i]);
            }
        }
        if ((access & RELAXED_ORDERING) != 0) {
            sb.append(sb.isEmpty() ? "" : "|").append("RELAXED_ORDERING");
        }
        return sb.isEmpty() ? "0" : sb.toString();
    }
}
