package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Function;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.rdma.tools.RdmaTools;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/**
 * {@code rdma:write_bw|read_bw|send_bw|write_lat --out_json_file F} over two ConnectX-3 models:
 * the file a JSON library reads is perftest's object, and its numbers are the ones of the row
 * the tool printed.
 */
class PerftestJsonToolsTest {

    private static final List<String> BW = List.of("MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate");
    private static final List<String> LAT = List.of("MsgSize", "n_iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev",
            "percentile_99", "percentile_99.9");

    @TempDir
    Path tmp;
    Lab lab;
    RdmaTools tools;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        tools = lab.tools();
    }

    @AfterEach
    void down() {
        lab.close();
    }

    /** The row printed after the column header (the line starting with the size). */
    private static String[] row(String out, int size) {
        return out.lines().filter(l -> l.startsWith(" " + size + " ")).findFirst().orElseThrow(() -> new AssertionError(out)).trim()
                .split("\\s+");
    }

    private void check(String tool, Function<Object[], String> run, int size, String test, List<String> columns) throws Exception {
        Path f = tmp.resolve(tool + ".json");
        String out = run.apply(new Object[] {"-s", String.valueOf(size), "-n", "200", "--out_json_file", f.toString()});
        JsonObject j = JsonParser.parseString(Files.readString(f)).getAsJsonObject();
        JsonObject info = j.getAsJsonObject("test_info");
        assertEquals(test, info.get("test").getAsString(), tool);
        assertEquals("mlx4_0", info.get("Device").getAsString(), tool);
        assertEquals("RC", info.get("Connection_type").getAsString(), tool);
        JsonObject res = j.getAsJsonObject("results");
        assertEquals(columns, List.copyOf(res.keySet()), tool);
        String[] cols = row(out, size);
        for (int i = 0; i < columns.size(); i++) {
            assertEquals(Double.parseDouble(cols[i]), res.get(columns.get(i)).getAsDouble(), tool + " " + columns.get(i) + "\n" + out);
        }
        assertEquals(size, res.get("MsgSize").getAsInt());
        assertEquals(200, res.get("n_iterations").getAsInt());
        assertTrue(res.get(columns.get(3)).getAsDouble() > 0, tool + ": a measured number\n" + out);
    }

    @Test
    void eachToolsJsonIsPerftestsAndEqualsItsRow() throws Exception {
        check("write_bw", tools::write_bw, 4096, "RDMA_Write_BW_Test", BW);
        check("read_bw", tools::read_bw, 4096, "RDMA_Read_BW_Test", BW);
        check("send_bw", tools::send_bw, 4096, "Send_BW_Test", BW);
        check("write_lat", tools::write_lat, 64, "RDMA_Write_Latency_Test", LAT);
    }

    /** As perftest, the file is rewritten after each size: after -a it holds the last size. */
    @Test
    void aSweepLeavesTheLastSize() throws Exception {
        Path f = tmp.resolve("sweep.json");
        tools.write_bw("-a", "-n", "20", "--out_json", "--out_json_file=" + f);
        assertEquals(8 << 20, JsonParser.parseString(Files.readString(f)).getAsJsonObject().getAsJsonObject("results").get("MsgSize").getAsInt());
    }
}
