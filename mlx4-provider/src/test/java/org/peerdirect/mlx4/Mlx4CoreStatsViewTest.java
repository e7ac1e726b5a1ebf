package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.mlx4.core.CmdLog;
import org.peerdirect.mlx4.stats.Mlx4CoreStats;

/** The console's view of the mlx4 devices says what {@code mlx4:cmdlog} and {@code mlx4:pages} print. */
class Mlx4CoreStatsViewTest {

    @TempDir
    Path tmp;

    @Test
    void eachDeviceWithItsLastCommandsAndPages() {
        try (Lab lab = new Lab(tmp, 2)) {
            Mlx4CoreStats view = new Mlx4CoreStatsView(() -> lab.devs);
            List<Mlx4CoreStats.Device> ds = view.devices(5);
            assertEquals(List.of("mlx4_0", "mlx4_1"), ds.stream().map(Mlx4CoreStats.Device::name).toList());
            Mlx4CoreStats.Device d = ds.get(0);
            CmdLog log = lab.devs.get(0).core().cmd.log();
            assertEquals(log.total(), d.commandsTotal());
            assertTrue(d.commandsTotal() > 5, "the bring-up ran commands: " + d.commandsTotal());
            assertEquals(5, d.commands().size(), "the last five");
            CmdLog.Entry last = log.entries().getLast();
            Mlx4CoreStats.Command c = d.commands().getLast();
            assertEquals(last.seq(), c.seq());
            assertTrue(last.toString().contains(c.opcode()) && last.toString().contains(c.result()), last + " vs " + c);
            assertEquals(lab.devs.get(0).core().fn.bdf(), d.bdf());
            assertEquals((long) lab.devs.get(0).core().dma.live(), d.pages().get("dma_pages_live"));
            assertTrue(d.pages().get("dma_pages_live") > 0, "the driver holds DMA pages (EQ rings, firmware area)");
            assertTrue(d.eventMode(), "commands complete by event once the EQs are up");
        }
    }
}
