package org.peerdirect.rdma.tools;

import java.util.Locale;

/**
 * One size's result of a perftest test, the numbers behind the row perftest prints
 * ({@code print_full_bw_report}, {@code print_report_lat}) and the {@code "results"} object
 * it writes with {@code --out_json} ({@code write_bw_report_to_file},
 * {@code write_report_lat_to_file}). The row and the JSON are formatted from the same fields
 * with the same precision ({@code REPORT_FMT} / {@code REPORT_FMT_JSON}: two decimals, the
 * message rate six), so a script reading either reads the same numbers.
 */
sealed interface PerftestResult {

    /** The text row, as {@link PerftestReport}'s column header announces it. */
    String row();

    /** The members of perftest's {@code "results"} object, without the braces. */
    String json();

    /**
     * A bandwidth row: peak and average in MiB/s (perftest's "MB/sec" are 2^20 bytes), the
     * message rate in millions per second.
     */
    record Bw(int size, long iters, double peak, double avg, double mpps) implements PerftestResult {

        @Override
        public String row() {
            return String.format(" %-10d %-14d %-18.2f %-20.2f %.6f", size, iters, peak, avg, mpps);
        }

        /** {@code REPORT_FMT_JSON} followed by {@code REPORT_EXT_JSON} (no CPU utilisation). */
        @Override
        public String json() {
            return String.format(Locale.ROOT, "\"MsgSize\": %d,%n\"n_iterations\": %d,%n\"BW_peak\": %.2f,%n\"BW_average\": %.2f,%n"
                    + "\"MsgRate\": %.6f%n", size, iters, peak, avg, mpps);
        }
    }

    /** A latency row: one-way latencies in microseconds, as {@code print_report_lat} computes them. */
    record Lat(int size, int iters, double min, double max, double typical, double avg, double stdev, double p99, double p999)
            implements PerftestResult {

        /** The row's statistics from the {@code sorted} one-way latencies in microseconds. */
        static Lat of(int size, double[] sorted) {
            int n = sorted.length;
            double sum = 0;
            for (double v : sorted) {
                sum += v;
            }
            double avg = sum / n;
            double var = 0;
            for (double v : sorted) {
                var += (v - avg) * (v - avg);
            }
            return new Lat(size, n, sorted[0], sorted[n - 1], sorted[n / 2], avg, Math.sqrt(var / n),
                    sorted[(int) Math.min(n - 1, Math.ceil(n * 0.99) - 1)], sorted[(int) Math.min(n - 1, Math.ceil(n * 0.999) - 1)]);
        }

        @Override
        public String row() {
            return String.format(" %-6d %-13d %-14.2f %-12.2f %-18.2f %-16.2f %-15.2f %-22.2f %-10.2f", size, iters, min, max, typical, avg,
                    stdev, p99, p999);
        }

        /** {@code REPORT_FMT_LAT_JSON} followed by {@code REPORT_EXT_JSON}. */
        @Override
        public String json() {
            return String.format(Locale.ROOT, "\"MsgSize\": %d,%n\"n_iterations\": %d,%n\"t_min\": %.2f,%n\"t_max\": %.2f,%n"
                    + "\"t_typical\": %.2f,%n\"t_avg\": %.2f,%n\"t_stdev\": %.2f,%n\"percentile_99\": %.2f,%n\"percentile_99.9\": %.2f%n",
                    size, iters, min, max, typical, avg, stdev, p99, p999);
        }
    }
}
