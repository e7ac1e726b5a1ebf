package org.peerdirect.bench;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.CommandLineOptions;

/**
 * {@code ./peerdirect bench [JMH options] [benchmark regex]}: runs JMH (its usual options work:
 * {@code -f}, {@code -wi}, {@code -i}, {@code -prof gc}, ...) and then prints a summary in which
 * every benchmark with a {@code size} parameter also shows its bandwidth in GB/s.
 */
public final class BenchMain {

    private BenchMain() {
    }

    public static void main(String[] args) throws Exception {
        CommandLineOptions options = new CommandLineOptions(args);
        if (options.shouldHelp() || options.shouldList() || options.shouldListProfilers()
                || options.shouldListResultFormats() || options.shouldListWithParams()) {
            org.openjdk.jmh.Main.main(args);
            return;
        }
        Collection<RunResult> results = new Runner(options).run();
        System.out.println();
        System.out.println("peerdirect summary (GB/s = size / time; 1 GB = 1e9 bytes)");
        for (Row r : rows(results)) {
            System.out.println(r.format());
        }
    }

    /** One benchmark result with its size parameter (bytes) when it has one. */
    record Row(String benchmark, String params, double nsPerOp, double error, long sizeBytes) {

        /** GB/s for one operation moving {@code sizeBytes} in {@code nsPerOp}: bytes per ns is GB/s. */
        double gbPerSecond() {
            return sizeBytes <= 0 || nsPerOp <= 0 ? Double.NaN : sizeBytes / nsPerOp;
        }

        String format() {
            String bw = Double.isNaN(gbPerSecond()) ? "" : String.format(Locale.ROOT, "%9.2f GB/s", gbPerSecond());
            return String.format(Locale.ROOT, "  %-45s %-22s %12.1f ± %-8.1f ns/op %s", benchmark, params, nsPerOp,
                    error, bw);
        }
    }

    static List<Row> rows(Collection<RunResult> results) {
        List<Row> rows = new ArrayList<>();
        for (RunResult rr : results) {
            var params = rr.getParams();
            var primary = rr.getPrimaryResult();
            double ns;
            double err;
            if (params.getMode() == org.openjdk.jmh.annotations.Mode.Throughput) {
                // ops per time unit: the time of one op, with the same relative error
                ns = toNanos(1, params.getTimeUnit()) / primary.getScore();
                err = ns * primary.getScoreError() / primary.getScore();
            } else {
                ns = toNanos(primary.getScore(), params.getTimeUnit());
                err = toNanos(primary.getScoreError(), params.getTimeUnit());
            }
            String size = params.getParam("size");
            List<String> ps = new ArrayList<>();
            for (String k : params.getParamsKeys()) {
                ps.add(k + "=" + params.getParam(k));
            }
            String name = params.getBenchmark();
            name = name.substring(name.lastIndexOf('.', name.lastIndexOf('.') - 1) + 1);
            rows.add(new Row(name, String.join(",", ps), ns, err, size == null ? -1 : Long.parseLong(size)));
        }
        return rows;
    }

    static double toNanos(double value, TimeUnit unit) {
        return value * unit.toNanos(1);
    }
}
