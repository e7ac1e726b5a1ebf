package org.peerdirect.mlx5.ib;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The {@code mlx5:} shell commands of mlx5_ib: {@code mlx5:mkey_cache}, the view debugfs gives
 * under {@code mlx5/<dev>/mr_cache/} (per entry: descriptors, cached, in use, limit, misses; here
 * with hits too), and its {@code limit} knob ({@code -l NDESCS LIMIT}); {@code mlx5:odp_stats}, the
 * page-fault EQ's counters and each live ODP MR's restrack counters ({@code rdma res show mr}'s
 * {@code page_faults}, {@code page_faults_handled}, {@code page_invalidations},
 * {@code page_invalidations_handled}, {@code page_prefetch}).
 */
@Component(service = Mlx5IbCommands.class, property = { "osgi.command.scope=mlx5", "osgi.command.function=mkey_cache",
        "osgi.command.function=odp_stats" })
public final class Mlx5IbCommands {

    private final Mlx5IbDriver driver;

    @Activate
    public Mlx5IbCommands(@Reference Mlx5IbDriver driver) {
        this.driver = driver;
    }

    @Descriptor("the mkey cache of each mlx5 IB device: per entry the descriptors (MTT entries), cached free mkeys, mkeys in use, "
            + "the limit, hits and misses; -a shows empty entries too; -l NDESCS LIMIT sets an entry's limit (the background work keeps "
            + "between LIMIT and 2 x LIMIT cached), as debugfs' mr_cache/N/limit. Example: mlx5:mkey_cache -d mlx5_0 -l 256 4")
    public String mkey_cache(@Descriptor("[-d mlx5_N] [-a] [-l NDESCS LIMIT]") String... args) {
        String dev = null;
        boolean all = false;
        int ndescs = -1;
        int limit = -1;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if ((a.equals("-d") || a.equals("--ib-dev")) && i + 1 < args.length) {
                dev = args[++i];
            } else if (a.equals("-a")) {
                all = true;
            } else if (a.equals("-l") && i + 2 < args.length) {
                ndescs = (int) Args.integer("mlx5:mkey_cache", "-l NDESCS", args[++i], 4, 4 << Mlx5MkeyCache.MAX_ORDER);
                limit = (int) Args.integer("mlx5:mkey_cache", "-l LIMIT", args[++i], 0, 10_000);
            } else {
                throw new UsageException("mlx5:mkey_cache: unknown argument '" + a + "' (it takes -d mlx5_N, -a, -l NDESCS LIMIT)");
            }
        }
        List<Mlx5IbDev> devs = new ArrayList<>();
        for (Mlx5IbDev d : driver.devices()) {
            if (dev == null || d.name().equals(dev)) {
                devs.add(d);
            }
        }
        if (devs.isEmpty()) {
            throw new UsageException("mlx5:mkey_cache: no mlx5 IB device" + (dev == null ? "" : " '" + dev + "'") + " (there are: "
                    + driver.devices().stream().map(Mlx5IbDev::name).toList() + ")");
        }
        if (limit >= 0) {
            if (devs.size() != 1) {
                throw new UsageException("mlx5:mkey_cache: -l sets one device's limit: give -d mlx5_N");
            }
            try {
                devs.get(0).setMkeyCacheLimit(ndescs, limit);
            } catch (IllegalArgumentException e) {
                throw new UsageException("mlx5:mkey_cache: " + e.getMessage());
            }
        }
        List<String> out = new ArrayList<>();
        for (Mlx5IbDev d : devs) {
            out.add(d.mkeyCacheSummary(all));
        }
        return String.join("\n", out);
    }

    @Descriptor("on-demand paging of each mlx5 IB device: the page-fault EQ (faults served, errors, invalidations) and every live ODP MR's "
            + "counters (page_faults and page_invalidations in pages, the *_handled ones in events, page_prefetch), as rdma res show mr. "
            + "Example: mlx5:odp_stats -d mlx5_0")
    public String odp_stats(@Descriptor("[-d mlx5_N]") String... args) {
        String dev = null;
        for (int i = 0; i < args.length; i++) {
            if ((args[i].equals("-d") || args[i].equals("--ib-dev")) && i + 1 < args.length) {
                dev = args[++i];
            } else {
                throw new UsageException("mlx5:odp_stats: unknown argument '" + args[i] + "' (it takes -d mlx5_N)");
            }
        }
        List<String> out = new ArrayList<>();
        for (Mlx5IbDev d : driver.devices()) {
            if (dev == null || d.name().equals(dev)) {
                out.addAll(d.odpStats());
            }
        }
        if (out.isEmpty()) {
            throw new UsageException("mlx5:odp_stats: no mlx5 IB device" + (dev == null ? "" : " '" + dev + "'") + " (there are: "
                    + driver.devices().stream().map(Mlx5IbDev::name).toList() + ")");
        }
        return String.join("\n", out);
    }
}
