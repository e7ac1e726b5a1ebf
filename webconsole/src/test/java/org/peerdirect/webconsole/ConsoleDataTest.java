package org.peerdirect.webconsole;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;

/**
 * The console's data and live feed without a browser: what is gone is {@link ConsoleData.Gone}
 * (a 404), the sampler's per-browser queue is bounded and a browser that takes nothing costs
 * counted drops, never a blocked publisher; the sampled rates come from the counters.
 */
class ConsoleDataTest {

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    MapSysfs sysfs = new MapSysfs();
    ConsoleData data;
    Sampler sampler;

    @BeforeEach
    void setUp() {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 4 << 20);
        iommu = new Iommu(mm);
        IbvDeviceList none = new IbvDeviceList() {
            @Override
            public List<IbvDevice> devices() {
                return List.of();
            }

            @Override
            public IbvDevice device(String name) {
                throw new IllegalArgumentException("no RDMA device " + name);
            }
        };
        data = new ConsoleData(none, mm, iommu, sysfs, List::of);
        sampler = new Sampler(data);
    }

    @AfterEach
    void tearDown() {
        sampler.deactivate();
        assertTrue(iommu.audit().clean(), "IOMMU audit: " + iommu.audit());
        mm.close();
    }

    @Test
    void whatIsNotThereIsGoneNotAnError() {
        assertThrows(ConsoleData.Gone.class, () -> data.device("mlx5_9"));
        assertThrows(ConsoleData.Gone.class, () -> data.process(4242));
        assertThrows(ConsoleData.Gone.class, () -> data.peerClient("no_such"));
        assertThrows(ConsoleData.Gone.class, () -> data.odp("mlx5_9"));
        int pid = mm.createProcess("short-lived").pid();
        assertEquals("short-lived", data.process(pid).name());
        mm.process(pid).exit();
        assertThrows(ConsoleData.Gone.class, () -> data.process(pid), "a process that exited is gone");
    }

    /** A device of the list, removable. */
    static final class FakeDevice implements IbvDevice {
        volatile boolean removed;

        @Override
        public String name() {
            return "mlx5_0";
        }

        @Override
        public long nodeGuid() {
            return 0x0002c90300000001L;
        }

        @Override
        public String driver() {
            return "mlx5";
        }

        @Override
        public org.peerdirect.ib.core.verbs.IbvContext open(org.peerdirect.kernel.mm.AddressSpace process) {
            throw new AssertionError("the console opens no context");
        }

        @Override
        public boolean removed() {
            return removed;
        }
    }

    @Test
    void aDeviceIsReadFromSysfsAndIsGoneOnceRemoved() {
        FakeDevice dev = new FakeDevice();
        ConsoleData one = new ConsoleData(new IbvDeviceList() {
            @Override
            public List<IbvDevice> devices() {
                return List.of(dev);
            }

            @Override
            public IbvDevice device(String name) {
                return dev;
            }
        }, mm, iommu, sysfs, List::of);
        String d = ConsoleData.CLASS_INFINIBAND + "/mlx5_0";
        sysfs.attribute(d + "/fw_ver", () -> "16.35.1012");
        sysfs.attribute(d + "/ports/1/state", () -> "4: ACTIVE");
        sysfs.attribute(d + "/ports/1/rate", () -> "100 Gb/sec (4X EDR)");
        ConsoleData.Device got = one.device("mlx5_0");
        assertEquals("16.35.1012", got.fwVer());
        assertEquals(List.of(new ConsoleData.Port(1, "4: ACTIVE", "", "100 Gb/sec (4X EDR)", "", "")), got.ports());
        assertEquals(List.of("mlx5_0"), one.sysfsDevices());
        dev.removed = true;
        assertThrows(ConsoleData.Gone.class, () -> one.device("mlx5_0"), "a removed device is gone");
        assertEquals(List.of(), one.deviceNames());
    }

    @Test
    void peerClientsAndOdpCountersComeFromSysfs() {
        sysfs.attribute(ConsoleData.MEMORY_PEERS + "/example_peer/num_alloc_mrs", () -> "3");
        sysfs.attribute(ConsoleData.MEMORY_PEERS + "/example_peer/version", () -> "1.0");
        sysfs.attribute(ConsoleData.CLASS_INFINIBAND + "/mlx5_0/odp/page_faults", () -> "17");
        assertEquals(List.of("example_peer"), data.peerClients());
        assertEquals(Map.of("num_alloc_mrs", "3", "version", "1.0"), data.peerClient("example_peer"));
        assertEquals(List.of("mlx5_0"), data.odpDevices());
        assertEquals(17, data.counter(ConsoleData.CLASS_INFINIBAND + "/mlx5_0/odp/page_faults"));
        assertEquals(0, data.counter(ConsoleData.CLASS_INFINIBAND + "/mlx5_0/odp/absent"));
        sysfs.remove(ConsoleData.MEMORY_PEERS + "/example_peer");
        assertThrows(ConsoleData.Gone.class, () -> data.peerClient("example_peer"), "an unloaded client is gone");
    }

    @Test
    void aBrowserThatTakesNothingCostsCountedDropsNotABlockedSampler() throws Exception {
        BlockingQueue<String> q = sampler.subscribe();
        sampler.unsubscribe(q); // the timer's own points must not mix in: publish by hand below
        BlockingQueue<String> slow = sampler.subscribe();
        long before = sampler.dropped();
        int capacity = slow.remainingCapacity() + slow.size();
        for (int i = 0; i < capacity + 10; i++) {
            sampler.publish("p" + i);
        }
        assertEquals(capacity, slow.size(), "the queue stays bounded");
        assertTrue(sampler.dropped() - before >= 10, "the oldest points were dropped and counted: " + (sampler.dropped() - before));
        assertEquals("p" + (capacity + 9), List.copyOf(slow).get(capacity - 1), "the newest point is kept");
        sampler.unsubscribe(slow);
        assertEquals(0, sampler.subscribers());
    }

    @Test
    void stoppingTheSamplerEndsEveryStream() throws Exception {
        BlockingQueue<String> q = sampler.subscribe();
        sampler.publish("p");
        sampler.deactivate();
        assertEquals(Sampler.END, q.poll(), "the pending point is dropped, the stream told to end");
        assertEquals(Sampler.END, sampler.subscribe().poll(), "a browser coming late ends at once");
    }

    @Test
    void aPointCarriesTheRatesAndTheDropCount() {
        iommu.createDomain("0000:05:00.0");
        Map<String, Long> c = sampler.counters();
        assertEquals(0L, c.get("bytes/0000:05:00.0"));
        sysfs.attribute(ConsoleData.CLASS_INFINIBAND + "/mlx5_0/odp/page_faults", () -> "5");
        sysfs.attribute(ConsoleData.CLASS_INFINIBAND + "/mlx5_0/odp/invalidations", () -> "2");
        assertEquals(5L, sampler.counters().get("faults/mlx5_0"));
        assertEquals(2L, sampler.counters().get("invalidations/mlx5_0"));
        String p = sampler.point(1000, Map.of("faults/mlx5_0", 2.25));
        assertTrue(p.startsWith("{\"t\":1000,\"dropped\":"), p);
        assertTrue(p.endsWith("\"v\":{\"faults/mlx5_0\":2.3}}") || p.endsWith("\"v\":{\"faults/mlx5_0\":2.2}}"), p);
        iommu.destroyDomain(iommu.domains().get(0));
    }

    @Test
    void metricsParseStatesAndRatesAsNodeExporterDoes() {
        assertEquals(4.0, MetricsServlet.parse("4: ACTIVE"));
        assertEquals(5.0, MetricsServlet.parse("5: LinkUp"));
        assertEquals(1.25e10, MetricsServlet.parse("100 Gb/sec (4X EDR)"));
        assertEquals(null, MetricsServlet.parse("InfiniBand"));
    }

    @Test
    void pagesEscapeWhatTheyPrint() {
        assertEquals("a&lt;b&gt;&amp;&quot;&#39;", Page.esc("a<b>&\"'"));
        assertTrue(LoopbackAccess.isLoopback("127.0.0.1"));
        assertTrue(LoopbackAccess.isLoopback("::1"));
        assertTrue(!LoopbackAccess.isLoopback("10.1.2.3"));
    }
}
