package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * perftest's output, in one place: the banner ({@code ctx_print_test_info}) and the column headers
 * of the result rows ({@link PerftestResult}: {@code print_report_bw}, {@code print_report_lat}),
 * column for column as perftest prints them so that scripts reading perftest's output read these;
 * {@link PerftestJson} writes the same run as perftest's {@code --out_json} file.
 */
final class PerftestReport {

    /** How the two sides exchange their QP numbers and keys (perftest: "Ethernet" for its TCP socket, or "rdma_cm"). */
    static final String DATA_EX_METHOD = "in-JVM fabric";

    static final String LINE = "---------------------------------------------------------------------------------------";

    private static final String BW_HEADER = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
    private static final String LAT_HEADER = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
            + "99% percentile[usec]   99.9% percentile[usec] \n";

    private PerftestReport() {
    }

    /** The banner and the column header of the test {@code p} describes, run from {@code dev} with buffers in {@code mem} (null: host). */
    static void banner(StringBuilder out, PerftestParameters p, IbvDevice dev, boolean ethernet, PeerMemoryAllocator mem) {
        out.append(LINE).append('\n');
        out.append(String.format("                    %s%n", p.title));
        out.append(String.format(" Dual-port       : OFF\t\tDevice         : %s%n", dev.name()));
        out.append(String.format(" Number of qps   : %d\t\tTransport type : IB%n", p.qps));
        out.append(" Connection type : RC\t\tUsing SRQ      : OFF\n");
        if (!p.latency) {
            out.append(String.format(" TX depth        : %d%n", p.depth));
            out.append(String.format(" CQ Moderation   : %d%n", Math.min(100, p.depth)));
        }
        out.append(" Mtu             : 4096[B]\n Link type       : ").append(ethernet ? "Ethernet" : "IB")
                .append("\n Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n");
        if (ethernet) { // perftest prints the GID index it addresses by on RoCE
            out.append(" GID index       : 0\n");
        }
        out.append(" Data ex. method : ").append(DATA_EX_METHOD).append('\n');
        out.append(String.format(" Memory          : %s%n", mem == null ? "host" + (p.huge ? ", 2 MiB huge pages" : "")
                + (p.odp ? ", registered on demand (ODP)" : "")
                : "peer client " + mem.name() + (p.dmabuf ? ", dma-buf MRs" : "")));
        if (p.all) {
            out.append(String.format(" Iterations      : at most %d MiB per size and QP%n", PerftestParameters.SWEEP_CAP >> 20));
        }
        out.append(LINE).append('\n');
        out.append(p.latency ? LAT_HEADER : BW_HEADER);
    }

    /** With {@code --use_hugepages}: how many 2 MiB IOMMU entries map the buffers. */
    static String superpages(long superpages) {
        return String.format(" IOMMU: %d 2 MiB entries map the buffers now (one per huge page, where 512 4 KiB entries map ordinary pages)%n",
                superpages);
    }
}
