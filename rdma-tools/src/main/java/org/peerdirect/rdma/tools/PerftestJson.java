package org.peerdirect.rdma.tools;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.shell.UsageException;

/**
 * perftest's {@code --out_json} report ({@code perftest_parameters.c}: {@code write_test_info_to_file},
 * {@code write_bw_report_to_file}, {@code write_report_lat_to_file}): one object with
 * {@code "test_info"} (the banner's values) and {@code "results"} (one size's row,
 * {@link PerftestResult#json}). Field names, order, nesting and number formats are perftest's,
 * so that scripts parsing perftest's file parse this one.
 *
 * <p>As perftest does, the file is written (created or truncated) after each size: with
 * {@code -a} it holds the last size's results. Members perftest writes only for options these
 * tools lack (dual port, events, multicast, post lists, GPU ids, TOS) are left out as perftest
 * leaves them out when the option is off; {@code "PCIe_relax_order"} is {@code "Unsupported"}
 * as in a perftest built without relaxed-ordering support (the model has no such attribute),
 * without the stray leading space of perftest's key in that build.
 */
final class PerftestJson {

    /** perftest's {@code DEFAULT_JSON_FILE_NAME}, in the working directory. */
    static final String DEFAULT_FILE = "perftest_out.json";

    private PerftestJson() {
    }

    /**
     * The file {@code --out_json} / {@code --out_json_file} ask for, or null when neither is given.
     * perftest writes only with {@code --out_json} and ignores a lone {@code --out_json_file};
     * here the file name implies the report (a lone name silently writing nothing would be a
     * wrong answer). A file whose directory does not exist is refused before the test runs.
     */
    static Path file(Options o) {
        if (!o.flag("--out_json") && !o.flag("--out_json_file")) {
            return null;
        }
        Path f = Path.of(o.string("--out_json_file")).toAbsolutePath();
        if (!Files.isDirectory(f.getParent())) {
            throw new UsageException(o.tool() + ": --out_json_file " + o.string("--out_json_file") + ": directory " + f.getParent()
                    + " does not exist");
        }
        if (Files.isDirectory(f)) {
            throw new UsageException(o.tool() + ": --out_json_file " + o.string("--out_json_file") + " is a directory");
        }
        return f;
    }

    /** Writes {@code r}, the result of one size of the test {@code p} describes, run from {@code device}. */
    static void write(Path file, PerftestParameters p, String device, boolean ethernet, PerftestResult r) {
        String doc = "{\n" + testInfo(p, device, ethernet) + "\"results\": {\n" + r.json() + "}\n}\n";
        try {
            Files.writeString(file, doc, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(p.o.tool() + ": cannot write the JSON report " + file + ": " + e.getMessage(), e);
        }
    }

    /** {@code write_test_info_to_file}: the client's view of the test, with the trailing comma perftest writes after it. */
    static String testInfo(PerftestParameters p, String device, boolean ethernet) {
        StringBuilder j = new StringBuilder("\"test_info\": {\n");
        j.append("\"test\": \"").append(testName(p)).append("\",\n");
        j.append("\"Dual_port\": \"OFF\",\n\"Device\": ").append(quote(device)).append(",\n");
        j.append("\"Number_of_qps\": ").append(p.qps).append(",\n\"Transport_type\": \"IB\",\n");
        j.append("\"Connection_type\": \"RC\",\n\"Using_SRQ\": \"OFF\",\n");
        j.append("\"PCIe_relax_order\": \"Unsupported\",\n");
        j.append("\"ibv_wr_API\": \"OFF\",\n"); // the tools post with ibv_post_send (perftest's --use_old_post_send)
        // a latency test has one write in flight: perftest's tx_depth is 1 for its latency tests
        j.append("\"TX_depth\": ").append(p.latency ? 1 : p.depth).append(",\n");
        if (!p.latency) {
            j.append("\"CQ_Moderation\": ").append(Math.min(100, p.depth)).append(",\n");
        }
        j.append("\"Mtu\": 4096,\n\"Link_type\": \"").append(ethernet ? "Ethernet" : "IB").append("\",\n");
        if (ethernet) {
            j.append("\"GID_index\": 0,\n");
        }
        if (p.op == IbvWrOpcode.RDMA_READ || p.atomic) {
            j.append("\"Outstand_reads\": ").append(Endpoint.RD_ATOMIC).append(",\n");
        } else {
            j.append("\"Max_inline_data\": 0,\n");
        }
        j.append("\"rdma_cm_QPs\": \"OFF\",\n");
        j.append("\"Use_ROCm_memory\": \"OFF\",\n\"Use_MUSA_memory\": \"OFF\",\n");
        j.append("\"Data_ex_method\": ").append(quote(PerftestReport.DATA_EX_METHOD)).append("\n},\n");
        return j.toString();
    }

    /** perftest's test name: {@code testsStr[verb]}, the atomic's type, {@code BW_} or {@code Latency_}, {@code Test}. */
    static String testName(PerftestParameters p) {
        String verb = switch (p.op) {
            case RDMA_WRITE -> "RDMA_Write";
            case RDMA_READ -> "RDMA_Read";
            case SEND -> "Send";
            case ATOMIC_FETCH_AND_ADD -> "Atomic_FETCH_AND_ADD";
            case ATOMIC_CMP_AND_SWP -> "Atomic_CMP_AND_SWAP";
            case ATOMIC_WRITE -> "Atomic_ATOMIC_WRITE";
            default -> throw new IllegalStateException("no perftest test for " + p.op);
        };
        return verb + (p.latency ? "_Latency_Test" : "_BW_Test");
    }

    /** A JSON string (perftest prints names unescaped; a device name here may hold any character). */
    static String quote(String s) {
        StringBuilder q = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> q.append("\\\"");
                case '\\' -> q.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        q.append(String.format("\\u%04x", (int) c));
                    } else {
                        q.append(c);
                    }
                }
            }
        }
        return q.append('"').toString();
    }
}
