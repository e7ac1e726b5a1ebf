package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.BundleContext;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * DOCA Core inside Felix, as a user bundle calls it: the device list with the PCI addresses the
 * drivers publish, a memory map exported and imported on the container's mlx5 devices, and a sync
 * event a second thread waits on; everything destroyed, the process ends with nothing pinned and
 * the IOMMU audit clean.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaCoreIT {

    @Inject
    BundleContext context;
    @Inject
    IbvDeviceList devices;
    @Inject
    Mm mm;
    @Inject
    Iommu iommu;

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    @Test
    public void aUserBundleListsOpensMapsAndSignals() throws Exception {
        AddressSpace p = mm.createProcess("itest-doca");
        p.setMemlockLimit(1L << 30);
        try {
            List<DocaDevinfo> list = DocaDevinfo.createList(p, devices, DocaDevinfo.pciAddrOfServices(context));
            List<DocaDevinfo> mlx5 = list.stream().filter(i -> i.getIbdevName().startsWith("mlx5_")).toList();
            assertTrue("the container's mlx5 devices: " + list, mlx5.size() >= 1);
            for (DocaDevinfo i : list) {
                String bdf = i.getPciAddrStr();
                assertTrue(i + ": " + bdf, bdf.matches("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]"));
                assertSame(i, DocaDevinfo.byPciAddr(list, bdf));
            }
            DocaDev dev = DocaDev.open(mlx5.get(0));
            long buf = p.mmap(1 << 16);
            p.populate(buf, 1 << 16, true);
            DocaMmap m = DocaMmap.create();
            m.setMemrange(buf, 1 << 16);
            m.setPermissions(DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE);
            m.addDev(dev);
            m.start();
            DocaMmap imported = DocaMmap.createFromExport(1, m.exportRdma(dev), dev);
            assertEquals(m.rkey(dev), imported.remoteKey());
            assertEquals(new DocaMmap.Memrange(buf, 1 << 16), imported.getMemrange());

            DocaSyncEvent ev = DocaSyncEvent.create();
            ev.addPublisherLocationCpu(dev);
            ev.addSubscriberLocationCpu(dev);
            ev.start();
            CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> ev.waitGt(2, -1L));
            for (int i = 0; i < 3; i++) {
                ev.updateAdd(1);
            }
            waiter.get(20, TimeUnit.SECONDS);
            assertEquals(3, ev.get());

            ev.destroy();
            imported.destroy();
            m.destroy();
            dev.close();
            assertEquals("nothing of the process pinned", 0, p.pinnedPages());
        } finally {
            p.exit();
        }
        IommuAudit audit = iommu.audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }
}
