package org.peerdirect.mlx5.ib;

/**
 * The ODP counters of one mlx5 IB device over JMX ({@code org.peerdirect.mlx5:type=OdpStats,device=mlx5_N}):
 * the page-fault EQ's counters and each ODP MR's restrack counters, as {@code mlx5:odp_stats} and
 * {@code /sys/class/infiniband/mlx5_N/odp/} show them. All zero before the first ODP MR.
 */
public interface Mlx5OdpStatsMXBean {

    /** Page-fault events served. */
    long getPageFaults();

    /** Page faults resumed with the error flag. */
    long getFaultErrors();

    /** {@code PAGE_FAULT_RESUME} commands that failed. */
    long getResumeFailures();

    /** Invalidations that zapped device translations. */
    long getInvalidations();

    /** Pages made present by prefetch. */
    long getPrefetchedPages();

    /** Background prefetches (and child frees) that failed. */
    long getPrefetchErrors();

    /** One line per explicit or implicit ODP MR and dma-buf MR: its key and its counters. */
    String[] getMrs();
}
