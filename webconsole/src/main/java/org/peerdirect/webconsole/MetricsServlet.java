package org.peerdirect.webconsole;

import java.io.IOException;
import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.osgi.service.servlet.whiteboard.HttpWhiteboardConstants;
import org.peerdirect.hca.dpaview.DpaView;
import org.peerdirect.kernel.iommu.IommuDomain;

import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.Unit;
import jakarta.servlet.Servlet;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

/**
 * {@code /metrics} in the Prometheus text exposition format (the Prometheus Java client 1.x), the
 * counters the console shows. Names follow node_exporter's infiniband collector where they mean
 * the same ({@code node_infiniband_info}, {@code node_infiniband_state_id}); the rest is
 * {@code peerdirect_*}. Each value is read when Prometheus scrapes (callbacks), nothing is kept.
 */
@Component(service = Servlet.class, property = {HttpWhiteboardConstants.HTTP_WHITEBOARD_SERVLET_PATTERN + "=/metrics",
        HttpWhiteboardConstants.HTTP_WHITEBOARD_SERVLET_NAME + "=peerdirect-metrics"})
public final class MetricsServlet extends HttpServlet {

    private static final long serialVersionUID = 1L;

    private final transient PrometheusRegistry registry = new PrometheusRegistry();
    private final transient PrometheusTextFormatWriter writer = PrometheusTextFormatWriter.create();

    @Activate
    public MetricsServlet(@Reference ConsoleData data, @Reference Sampler sampler) {
        registerDevices(data);
        registerIommu(data);
        registerOdp(data);
        registerPeerClients(data);
        registerDpa();
        CounterWithCallback.builder().name("peerdirect_webconsole_dropped_points").help("Live-plot points dropped because a browser did not take them in time")
                .callback(cb -> cb.call(sampler.dropped())).register(registry);
    }

    /**
     * What node_exporter's infiniband collector reports, under its names, read from the same
     * files it reads ({@code class/infiniband/<dev>/fw_ver, board_id, hca_type},
     * {@code ports/<n>/state, phys_state, rate}): the two agree on every port.
     */
    private void registerDevices(ConsoleData data) {
        String ib = ConsoleData.CLASS_INFINIBAND + "/";
        // an info metric: the client's builders refuse the _info suffix on a gauge; its InfoSnapshot adds it
        registry.register(() -> {
            InfoSnapshot.Builder info = InfoSnapshot.builder().name("node_infiniband").help("Non-numeric data from /sys/class/infiniband/<device>, value is always 1.");
            for (String d : data.sysfsDevices()) {
                info.dataPoint(InfoSnapshot.InfoDataPointSnapshot.builder().labels(Labels.of("device", d, "board_id", data.attribute(ib + d + "/board_id"),
                        "firmware_version", data.attribute(ib + d + "/fw_ver"), "hca_type", data.attribute(ib + d + "/hca_type"))).build());
            }
            return info.build();
        });
        portGauge(data, "node_infiniband_state_id", "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
                "state");
        portGauge(data, "node_infiniband_physical_state_id", "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
                "phys_state");
        portGauge(data, "node_infiniband_rate_bytes_per_second", "Maximum signal transfer rate", "rate");
        // the PMA counters (ports/<n>/counters/), node_exporter's names; the data counters are 4-byte words there
        portCounter(data, "node_infiniband_port_data_received_bytes", "Number of data octets received on all links", "port_rcv_data", 4);
        portCounter(data, "node_infiniband_port_data_transmitted_bytes", "Number of data octets transmitted on all links", "port_xmit_data", 4);
        portCounter(data, "node_infiniband_port_packets_received", "Number of packets received on all VLs by this port (including errors)",
                "port_rcv_packets", 1);
        portCounter(data, "node_infiniband_port_packets_transmitted", "Number of packets transmitted on all VLs from this port (including errors)",
                "port_xmit_packets", 1);
        portCounter(data, "node_infiniband_unicast_packets_received", "Number of unicast packets received (including errors)", "unicast_rcv_packets", 1);
        portCounter(data, "node_infiniband_unicast_packets_transmitted", "Number of unicast packets transmitted (including errors)",
                "unicast_xmit_packets", 1);
        portCounter(data, "node_infiniband_multicast_packets_received", "Number of multicast packets received (including errors)",
                "multicast_rcv_packets", 1);
        portCounter(data, "node_infiniband_multicast_packets_transmitted", "Number of multicast packets transmitted (including errors)",
                "multicast_xmit_packets", 1);
        portCounter(data, "node_infiniband_port_errors_received", "Number of packets containing an error that were received on this port",
                "port_rcv_errors", 1);
        portCounter(data, "node_infiniband_port_transmit_discards", "Number of outbound packets discarded by the port because the port is down or congested",
                "port_xmit_discards", 1);
        // the driver's own counters (ports/<n>/hw_counters/): no node_exporter name, one labelled counter
        CounterWithCallback.builder().name("peerdirect_infiniband_hw_stats").help("A port's driver counter (/sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>)")
                .labelNames("device", "port", "counter").callback(cb -> {
                    for (String d : data.sysfsDevices()) {
                        for (String p : data.sysfsPorts(d)) {
                            String dir = ConsoleData.CLASS_INFINIBAND + "/" + d + "/ports/" + p + "/hw_counters";
                            data.files(dir).forEach(c -> {
                                Double x = number(data.attribute(dir + "/" + c));
                                if (x != null) {
                                    cb.call(x, d, p, c);
                                }
                            });
                        }
                    }
                }).register(registry);
    }

    /** A counter per port from {@code ports/<n>/counters/<file>} times {@code scale}; no sample where the driver has no such file. */
    private void portCounter(ConsoleData data, String name, String help, String file, int scale) {
        CounterWithCallback.builder().name(name).help(help)
                .labelNames("device", "port").callback(cb -> {
                    for (String d : data.sysfsDevices()) {
                        for (String p : data.sysfsPorts(d)) {
                            Double x = number(data.attribute(ConsoleData.CLASS_INFINIBAND + "/" + d + "/ports/" + p + "/counters/" + file));
                            if (x != null) {
                                cb.call(x * scale, d, p);
                            }
                        }
                    }
                }).register(registry);
    }

    /** A counter file's value; null when absent ("") or not a number. */
    static Double number(String v) {
        try {
            return v.isEmpty() ? null : Double.valueOf(Long.parseUnsignedLong(v));
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** A gauge per port from {@code ports/<n>/<file>}: "4: ACTIVE" gives 4; "100 Gb/sec (4X EDR)" gives bytes per second. */
    private void portGauge(ConsoleData data, String name, String help, String file) {
        GaugeWithCallback.builder().name(name).help(help)
                .labelNames("device", "port").callback(cb -> {
                    for (String d : data.sysfsDevices()) {
                        for (String p : data.sysfsPorts(d)) {
                            String v = data.attribute(ConsoleData.CLASS_INFINIBAND + "/" + d + "/ports/" + p + "/" + file);
                            Double x = parse(v);
                            if (x != null) {
                                cb.call(x, d, p);
                            }
                        }
                    }
                }).register(registry);
    }

    /** "4: ACTIVE" -> 4; "100 Gb/sec (4X EDR)" -> 1.25e10 bytes/s (as node_exporter's parseRate); null when neither. */
    static Double parse(String v) {
        try {
            int colon = v.indexOf(':');
            if (colon > 0) {
                return Double.valueOf(v.substring(0, colon).strip());
            }
            int sp = v.indexOf(' ');
            if (sp > 0 && v.contains("Gb/sec")) {
                return Double.parseDouble(v.substring(0, sp)) * 125_000_000;
            }
        } catch (NumberFormatException e) {
            // not a state or a rate: no sample
        }
        return null;
    }

    private void registerIommu(ConsoleData data) {
        CounterWithCallback.builder().name("peerdirect_iommu_dma_read_bytes").unit(Unit.BYTES).help("Bytes a device read from memory by DMA through its IOMMU domain")
                .labelNames("domain").callback(cb -> data.domains().forEach(d -> cb.call(d.bytesRead(), d.name()))).register(registry);
        CounterWithCallback.builder().name("peerdirect_iommu_dma_written_bytes").unit(Unit.BYTES).help("Bytes a device wrote to memory by DMA through its IOMMU domain")
                .labelNames("domain").callback(cb -> data.domains().forEach(d -> cb.call(d.bytesWritten(), d.name()))).register(registry);
        CounterWithCallback.builder().name("peerdirect_iommu_faults").help("DMAs the IOMMU refused in a domain (missing or read-only mapping)")
                .labelNames("domain").callback(cb -> data.domains().forEach(d -> cb.call(d.faultCount(), d.name()))).register(registry);
        GaugeWithCallback.builder().name("peerdirect_iommu_mapped_pages").help("4 KiB pages mapped in an IOMMU domain now")
                .labelNames("domain").callback(cb -> data.domains().forEach((IommuDomain d) -> cb.call(d.mappedPages(), d.name()))).register(registry);
        CounterWithCallback.builder().name("peerdirect_iommu_audit_violations").help("IOMMU audit violations: use after free and frames freed while mapped (always a bug)")
                .callback(cb -> cb.call(data.audit().useAfterFree() + data.audit().freedWhileMapped())).register(registry);
    }

    private void registerOdp(ConsoleData data) {
        for (String c : List.of("page_faults", "invalidations", "fault_errors", "prefetched_pages")) {
            CounterWithCallback.builder().name("peerdirect_odp_" + c).help("ODP " + c.replace('_', ' ') + " of a device (/sys/class/infiniband/<device>/odp/" + c + ")")
                    .labelNames("device").callback(cb -> data.odpDevices().forEach(d ->
                            cb.call(data.counter(ConsoleData.CLASS_INFINIBAND + "/" + d + "/odp/" + c), d))).register(registry);
        }
    }

    /** The BlueField-3 DPAs as the DPA page shows them, when the silicon side publishes {@link DpaView} (bound later or never). */
    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY)
    private transient volatile DpaView dpas;

    /** Each DPA's snapshot now, skipping one unplugged since the listing; empty without {@link DpaView}. */
    private List<DpaView.Dpa> dpaSnapshots() {
        DpaView v = dpas;
        List<DpaView.Dpa> out = new java.util.ArrayList<>();
        if (v != null) {
            for (String bdf : v.functions()) {
                try {
                    out.add(v.dpa(bdf));
                } catch (IllegalArgumentException unplugged) {
                    // gone between the listing and the read: no sample
                }
            }
        }
        return out;
    }

    private void registerDpa() {
        CounterWithCallback.builder().name("peerdirect_dpa_eu_activations").help("Activations a DPA execution unit ran (dpa:ps' eu lines)")
                .labelNames("function", "eu").callback(cb -> dpaSnapshots().forEach(d -> d.eus().forEach(e ->
                        cb.call(e.activations(), d.bdf(), Integer.toString(e.eu()))))).register(registry);
        GaugeWithCallback.builder().name("peerdirect_dpa_eus_busy").help("DPA execution units an activation holds now")
                .labelNames("function").callback(cb -> dpaSnapshots().forEach(d -> cb.call(d.eusBusy(), d.bdf()))).register(registry);
        GaugeWithCallback.builder().name("peerdirect_dpa_processes").help("DPA processes alive on a BlueField-3")
                .labelNames("function").callback(cb -> dpaSnapshots().forEach(d -> cb.call(d.processes().size(), d.bdf()))).register(registry);
        GaugeWithCallback.builder().name("peerdirect_dpa_threads").help("DPA threads alive on a BlueField-3")
                .labelNames("function").callback(cb -> dpaSnapshots().forEach(d -> cb.call(d.threads().size(), d.bdf()))).register(registry);
    }

    private void registerPeerClients(ConsoleData data) {
        for (String c : List.of("num_alloc_mrs", "num_dealloc_mrs", "num_reg_pages", "num_dereg_pages", "num_free_callbacks")) {
            CounterWithCallback.builder().name("peerdirect_peer_mem_" + c.substring(4)).help("Peer memory client statistic " + c + " (/sys/kernel/infiniband/memory_peers/<client>/" + c + ")")
                    .labelNames("client").callback(cb -> data.peerClients().forEach(n ->
                            cb.call(data.counter(ConsoleData.MEMORY_PEERS + "/" + n + "/" + c), n))).register(registry);
        }
        for (String c : List.of("reg", "dereg")) {
            CounterWithCallback.builder().name("peerdirect_peer_mem_" + c + "_bytes").unit(Unit.BYTES).help("Bytes a peer memory client " + c + "istered (num_" + c + "_bytes)")
                    .labelNames("client").callback(cb -> data.peerClients().forEach(n ->
                            cb.call(data.counter(ConsoleData.MEMORY_PEERS + "/" + n + "/num_" + c + "_bytes"), n))).register(registry);
        }
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        resp.setContentType(PrometheusTextFormatWriter.CONTENT_TYPE);
        writer.write(resp.getOutputStream(), registry.scrape(), EscapingScheme.UNDERSCORE_ESCAPING);
    }
}
