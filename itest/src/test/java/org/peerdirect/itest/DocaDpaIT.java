package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.time.Duration;
import java.util.List;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.BundleContext;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.itest.dpa.LaunchProgsStubs;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * DOCA DPA inside Felix, as a user bundle calls it (DPA_MODEL.md §4 scenario 5): the container's
 * BlueField-3 opened through DOCA Core, a DPA context with a dpacc-built app, DOCA's
 * {@code dpa_kernel_launch} sample with its events (wait CPU→DPA at threshold 4, completion
 * DPA→CPU set to 10): the kernel does not start at 4, starts after 5, its four ranks run once and
 * the host sees 10; everything destroyed, nothing pinned, the IOMMU audit clean.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaDpaIT {

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
    public void theKernelLaunchSampleRunsOnTheContainersBlueField3() throws Exception {
        AddressSpace p = mm.createProcess("itest-doca-dpa");
        p.setMemlockLimit(1L << 30);
        try {
            List<DocaDevinfo> list = DocaDevinfo.createList(p, devices, DocaDevinfo.pciAddrOfServices(context));
            DocaDev dev = null;
            for (DocaDevinfo i : list) {
                if (!i.getIbdevName().startsWith("mlx5_")) {
                    continue;
                }
                DocaDev d = DocaDev.open(i);
                if (DocaDpa.capIsSupported(d)) {
                    dev = d;
                    break;
                }
                d.close();
            }
            assertTrue("a BlueField-3 among " + list, dev != null);
            DocaDpa dpa = DocaDpa.create(dev);
            dpa.setApp(LaunchProgsStubs.APP);
            dpa.start();
            DocaSyncEvent wait = DocaSyncEvent.create();
            wait.addPublisherLocationCpu(dev);
            wait.addSubscriberLocationDpa(dpa);
            wait.start();
            DocaSyncEvent comp = DocaSyncEvent.create();
            comp.addPublisherLocationDpa(dpa);
            comp.addSubscriberLocationCpu(dev);
            comp.start();
            long rec = dpa.memAlloc(1024);
            dpa.memset(rec, 0, 1024);
            int n = 4;
            dpa.kernelLaunchUpdateSet(wait, 4, comp, 10, n, LaunchProgsStubs.HELLO_WORLD, rec);
            wait.updateSet(4);
            for (int i = 0; i < 10; i++) {
                assertEquals("no rank before the wait event passed 4", 0, dpa.rpc(LaunchProgsStubs.LOAD64, rec));
            }
            wait.updateSet(5);
            comp.waitGt(9, -1L, Duration.ofSeconds(60));
            assertEquals(10, comp.get());
            assertEquals(n, dpa.rpc(LaunchProgsStubs.LOAD64, rec));
            for (int rank = 0; rank < n; rank++) {
                assertEquals(n * 1000L + rank + 1, dpa.rpc(LaunchProgsStubs.LOAD64, rec + 16 + 8L * rank));
            }
            wait.destroy();
            comp.destroy();
            dpa.stop();
            dpa.destroy();
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
