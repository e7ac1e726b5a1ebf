package org.peerdirect.mlx4;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.mlx4.core.CmdLog;
import org.peerdirect.mlx4.core.Icm;
import org.peerdirect.mlx4.core.Mlx4Dev;
import org.peerdirect.mlx4.stats.Mlx4CoreStats;

/** {@link Mlx4CoreStats} of the driver's devices: what {@link Mlx4Commands} prints, as values; reads only. */
@Component(service = Mlx4CoreStats.class)
public final class Mlx4CoreStatsView implements Mlx4CoreStats {

    private final Supplier<Collection<Mlx4Device>> bound;

    @Activate
    public Mlx4CoreStatsView(@Reference Mlx4Driver driver) {
        this(driver::devices);
    }

    /** Over the devices {@code bound} gives (a test's lab; the driver's devices). */
    Mlx4CoreStatsView(Supplier<Collection<Mlx4Device>> bound) {
        this.bound = bound;
    }

    @Override
    public List<Device> devices(int commands) {
        List<Mlx4Device> devs = new ArrayList<>(bound.get());
        devs.sort(Comparator.comparing(Mlx4Device::name));
        List<Device> out = new ArrayList<>();
        for (Mlx4Device d : devs) {
            Mlx4Dev core = d.core();
            CmdLog log = core.cmd.log();
            List<CmdLog.Entry> es = log.entries();
            List<Command> shown = es.subList(Math.max(0, es.size() - Math.max(0, commands)), es.size()).stream()
                    .map(Mlx4CoreStatsView::command).toList();
            Map<String, Long> pages = new LinkedHashMap<>();
            pages.put("icm_chunks_mapped", (long) core.icm.chunksMapped());
            pages.put("icm_chunk_pages", (long) Icm.CHUNK_PAGES);
            pages.put("dma_pages_live", (long) core.dma.live());
            out.add(new Device(d.name(), core.fn.bdf(), core.fwInfo().version(), core.boardId(), log.total(), core.cmd.eventMode(), shown,
                    pages));
        }
        return out;
    }

    private static Command command(CmdLog.Entry e) {
        String result = e.error() != null ? e.error() : String.format("%s(0x%x)", Mlx4Cmd.statusName(e.status()), e.status());
        return new Command(e.seq(), Mlx4Cmd.name(e.opcode()), e.opMod(), e.inMod(), e.events(), e.latencyNanos() / 1e3, result);
    }
}
