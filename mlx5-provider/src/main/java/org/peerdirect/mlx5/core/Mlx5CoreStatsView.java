package org.peerdirect.mlx5.core;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.mlx5.stats.Mlx5CoreStats;

/** A device's {@link Mlx5CoreStats}: reads of its command log, page counters and EQ table, nothing else. */
final class Mlx5CoreStatsView implements Mlx5CoreStats {

    private final Mlx5CoreDev dev;

    Mlx5CoreStatsView(Mlx5CoreDev dev) {
        this.dev = dev;
    }

    @Override
    public String name() {
        return dev.name();
    }

    @Override
    public String bdf() {
        return dev.function().bdf();
    }

    @Override
    public long commandsTotal() {
        return dev.cmdLog().total();
    }

    @Override
    public List<Command> commands(int n) {
        List<CmdLog.Entry> es = dev.cmdLog().entries();
        return es.subList(Math.max(0, es.size() - Math.max(0, n)), es.size()).stream().map(Mlx5CoreStatsView::command).toList();
    }

    private static Command command(CmdLog.Entry e) {
        String result;
        if (e.error() != null) {
            result = e.error();
        } else if (e.delivery() != CmdEntry.DELIVERY_OK) {
            result = "delivery " + CmdEntry.deliveryName(e.delivery());
        } else {
            result = String.format("%s(0x%x) syndrome 0x%x", Mlx5Cmd.statusName(e.status()), e.status(), e.syndrome());
        }
        return new Command(e.seq(), Mlx5Cmd.name(e.opcode()), e.opMod(), e.events(), e.latencyNanos() / 1e3, result);
    }

    @Override
    public Map<String, Long> pages() {
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("held", (long) dev.pagesHeld());
        m.put("given_boot", dev.pagesGiven(PageAlloc.Kind.BOOT));
        m.put("given_init", dev.pagesGiven(PageAlloc.Kind.INIT));
        m.put("given_regular", dev.pagesGiven(PageAlloc.Kind.REGULAR));
        m.put("page_requests", dev.pageRequests());
        m.put("dma_pages_live", (long) dev.dmaPagesLive());
        return m;
    }

    @Override
    public List<String> eqs() {
        return dev.eqsSummary();
    }
}
