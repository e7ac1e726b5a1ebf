package org.peerdirect.rdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.shell.UsageException;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/**
 * {@code --out_json}: the file is perftest's object ({@code test_info}, {@code results}) with
 * perftest's member names, and its numbers are the text row's, column for column. No device
 * here: the rows are made from numbers (the tools' runs are checked in mlx4-provider's
 * {@code PerftestJsonToolsTest}).
 */
class PerftestJsonTest {

    @TempDir
    Path tmp;

    private static PerftestParameters parsed(PerftestParameters p) {
        p.parse();
        return p;
    }

    private JsonObject written(PerftestParameters p, boolean ethernet, PerftestResult r) throws Exception {
        PerftestJson.write(p.jsonFile, p, "mlx5_0", ethernet, r);
        return JsonParser.parseString(Files.readString(p.jsonFile)).getAsJsonObject();
    }

    @Test
    void bandwidthReportHasPerftestsMembersAndTheRowsNumbers() throws Exception {
        Path f = tmp.resolve("bw.json");
        PerftestParameters p = parsed(PerftestParameters.bw("write_bw", "RDMA_Write BW Test", IbvWrOpcode.RDMA_WRITE,
                new Object[] {"-q", "2", "-t", "64", "--out_json_file", f.toString()}));
        assertEquals(f.toAbsolutePath(), p.jsonFile);
        PerftestResult.Bw r = new PerftestResult.Bw(65536, 5000, 12345.678, 12001.004, 0.192016);
        JsonObject j = written(p, false, r);
        assertEquals(List.of("test_info", "results"), List.copyOf(j.keySet()));
        JsonObject info = j.getAsJsonObject("test_info");
        assertEquals("RDMA_Write_BW_Test", info.get("test").getAsString());
        assertEquals("mlx5_0", info.get("Device").getAsString());
        assertEquals(2, info.get("Number_of_qps").getAsInt());
        assertEquals(64, info.get("TX_depth").getAsInt());
        assertEquals(64, info.get("CQ_Moderation").getAsInt());
        assertEquals(4096, info.get("Mtu").getAsInt());
        assertEquals("IB", info.get("Link_type").getAsString());
        assertEquals(0, info.get("Max_inline_data").getAsInt());
        assertFalse(info.has("GID_index"), "perftest writes GID_index only when one is used");
        assertEquals(PerftestReport.DATA_EX_METHOD, info.get("Data_ex_method").getAsString());
        JsonObject res = j.getAsJsonObject("results");
        assertEquals(List.of("MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"), List.copyOf(res.keySet()));
        String[] cols = r.row().trim().split("\\s+");
        assertEquals(Long.parseLong(cols[0]), res.get("MsgSize").getAsLong());
        assertEquals(Long.parseLong(cols[1]), res.get("n_iterations").getAsLong());
        assertEquals(Double.parseDouble(cols[2]), res.get("BW_peak").getAsDouble());
        assertEquals(Double.parseDouble(cols[3]), res.get("BW_average").getAsDouble());
        assertEquals(Double.parseDouble(cols[4]), res.get("MsgRate").getAsDouble());
        assertEquals(12345.68, res.get("BW_peak").getAsDouble(), "two decimals, as perftest's %.2lf");
    }

    @Test
    void latencyAndReadReportsNameTheirTestsAndColumns() throws Exception {
        Path f = tmp.resolve("lat.json");
        PerftestParameters lat = parsed(PerftestParameters.lat("write_lat", "RDMA_Write Latency Test", IbvWrOpcode.RDMA_WRITE,
                new Object[] {"--out_json", "--out_json_file=" + f}));
        double[] sorted = {1.0, 1.25, 1.5, 2.0, 9.75};
        PerftestResult.Lat r = PerftestResult.Lat.of(2, sorted);
        JsonObject j = written(lat, true, r);
        JsonObject info = j.getAsJsonObject("test_info");
        assertEquals("RDMA_Write_Latency_Test", info.get("test").getAsString());
        assertEquals(1, info.get("TX_depth").getAsInt());
        assertFalse(info.has("CQ_Moderation"), "a latency test has no CQ moderation");
        assertEquals("Ethernet", info.get("Link_type").getAsString());
        assertEquals(0, info.get("GID_index").getAsInt());
        JsonObject res = j.getAsJsonObject("results");
        List<String> names = List.of("MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "percentile_99",
                "percentile_99.9");
        assertEquals(names, List.copyOf(res.keySet()));
        String[] cols = r.row().trim().split("\\s+");
        for (int i = 0; i < names.size(); i++) {
            assertEquals(Double.parseDouble(cols[i]), res.get(names.get(i)).getAsDouble(), names.get(i));
        }
        assertEquals(9.75, res.get("t_max").getAsDouble());

        PerftestParameters read = parsed(PerftestParameters.bw("read_bw", "RDMA_Read BW Test", IbvWrOpcode.RDMA_READ,
                new Object[] {"--out_json_file", tmp.resolve("read.json").toString()}));
        JsonObject ri = written(read, false, new PerftestResult.Bw(8, 10, 1, 1, 1)).getAsJsonObject("test_info");
        assertEquals("RDMA_Read_BW_Test", ri.get("test").getAsString());
        assertEquals(Endpoint.RD_ATOMIC, ri.get("Outstand_reads").getAsInt());
        assertFalse(ri.has("Max_inline_data"), "perftest writes Outstand_reads instead for READ");
        PerftestParameters atomic = parsed(PerftestParameters.atomic("Atomic BW Test",
                new Object[] {"-A", "CMP_AND_SWAP", "--out_json_file", tmp.resolve("atomic.json").toString()}));
        assertEquals("Atomic_CMP_AND_SWAP_BW_Test", PerftestJson.testName(atomic));
    }

    @Test
    void withoutTheOptionsNoFileAndBadFilesAreRefusedBeforeTheTestRuns() {
        PerftestParameters none = parsed(PerftestParameters.bw("send_bw", "Send BW Test", IbvWrOpcode.SEND, new Object[0]));
        assertNull(none.jsonFile);
        PerftestParameters dflt = parsed(PerftestParameters.bw("send_bw", "Send BW Test", IbvWrOpcode.SEND, new Object[] {"--out_json"}));
        assertEquals(Path.of(PerftestJson.DEFAULT_FILE).toAbsolutePath(), dflt.jsonFile);
        UsageException e = assertThrows(UsageException.class, () -> parsed(PerftestParameters.bw("send_bw", "Send BW Test", IbvWrOpcode.SEND,
                new Object[] {"--out_json_file", tmp.resolve("no/such/dir/x.json").toString()})));
        assertTrue(e.getMessage().startsWith("rdma:send_bw: --out_json_file ") && e.getMessage().endsWith("does not exist"), e.getMessage());
        e = assertThrows(UsageException.class, () -> parsed(PerftestParameters.bw("send_bw", "Send BW Test", IbvWrOpcode.SEND,
                new Object[] {"--out_json_file", tmp.toString()})));
        assertTrue(e.getMessage().endsWith(" is a directory"), e.getMessage());
        e = assertThrows(UsageException.class, () -> PerftestParameters.bw("send_bw", "Send BW Test", IbvWrOpcode.SEND,
                new Object[] {"--out_json=yes"}));
        assertTrue(e.getMessage().contains("option --out_json (") && e.getMessage().endsWith("takes no value, got 'yes'"), e.getMessage());
    }

    @Test
    void namesAreQuotedAsJsonStrings() {
        assertEquals("\"a\\\"b\\\\c\\u0009\"", PerftestJson.quote("a\"b\\c\t"));
    }
}
