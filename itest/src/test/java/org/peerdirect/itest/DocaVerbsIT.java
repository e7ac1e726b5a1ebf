package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.peerdirect.itest.dpa.VerbsInitiatorTargetProgs.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
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
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.verbs.DocaVerbsAhAttr;
import org.peerdirect.doca.verbs.DocaVerbsQp;
import org.peerdirect.doca.verbs.DocaVerbsQpAttr;
import org.peerdirect.doca.verbs.DocaVerbsQpInitAttr;
import org.peerdirect.flexio.FlexioQp;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.itest.dpa.VerbsInitiatorTargetProgsStubs;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * DOCA Verbs with its data path on the DPA inside Felix (DPA_MODEL.md §4 scenario 8, DOCA's
 * {@code dpa_verbs_initiator_target}) through the bundles: on the container's BlueField-3 two
 * DOCA verbs RC QPs RESET→RTS with the sample's masks, each with a completion context and a polling
 * thread; the initiator's value goes round three times and ends at 0xf, both events pass 9;
 * everything destroyed, nothing pinned, the IOMMU audit clean.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaVerbsIT {

    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;

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

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    /** One side: its QP's DPA handle, buffer, map key, event and argument block. */
    private record Side(DocaVerbsQp qp, long handle, long buf, int mkey, DocaSyncEvent ev, long arg) {
    }

    private static Side side(DocaDev dev, DocaDpa dpa, boolean initiator, List<Runnable> undo) {
        long buf = dpa.memAlloc(8);
        dpa.memset(buf, 0, 8);
        undo.add(() -> dpa.memFree(buf));
        DocaMmap m = DocaMmap.create();
        m.setDpaMemrange(dpa, buf, 8);
        m.setPermissions(RW);
        m.addDev(dev);
        m.start();
        undo.add(m::destroy);
        long arg = dpa.memAlloc(A_SIZE);
        dpa.memset(arg, 0, A_SIZE);
        undo.add(() -> dpa.memFree(arg));
        DocaDpaThread t = DocaDpaThread.create(dpa);
        undo.add(t::destroy);
        t.setFuncArg(initiator ? VerbsInitiatorTargetProgsStubs.INITIATOR_THREAD : VerbsInitiatorTargetProgsStubs.TARGET_THREAD, arg);
        t.start();
        DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, 4);
        undo.add(comp::destroy);
        comp.setThread(t);
        comp.start();
        t.run();
        DocaVerbsQpInitAttr ia = DocaVerbsQpInitAttr.create();
        ia.setExternalDatapathEn(true);
        ia.setPd(dev);
        ia.setSqWr(4);
        ia.setRqWr(4);
        ia.setSendDpaCompletion(comp);
        ia.setReceiveDpaCompletion(comp);
        DocaVerbsQp qp = DocaVerbsQp.create(dev, ia);
        ia.destroy();
        undo.add(qp::destroy);
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationDpa(dpa);
        ev.addSubscriberLocationDpa(dpa);
        ev.start();
        undo.add(ev::destroy);
        dpa.h2dMemcpy(arg, le(comp.getDpaHandle(), qp.getDpaHandle(dpa), ev.getDpaHandle(dpa), 10));
        return new Side(qp, qp.getDpaHandle(dpa), buf, m.devGetDpaHandle(dev), ev, arg);
    }

    private static void connect(DocaDev dev, DocaVerbsQp qp, int remoteQpn) {
        DocaVerbsAhAttr ah = DocaVerbsAhAttr.create(dev);
        ah.setGid(FlexioQp.gid(dev.ibvContext().queryGid(1, 0)));
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        a.setNextState(DocaVerbsQpAttr.QP_STATE_INIT);
        a.setAllowRemoteWrite(true);
        a.setAllowRemoteRead(true);
        a.setPortNum(1);
        qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.ALLOW_REMOTE_WRITE | DocaVerbsQpAttr.ALLOW_REMOTE_READ
                | DocaVerbsQpAttr.PKEY_INDEX | DocaVerbsQpAttr.PORT_NUM);
        a.setNextState(DocaVerbsQpAttr.QP_STATE_RTR);
        a.setDestQpNum(remoteQpn);
        a.setMinRnrTimer(1);
        a.setAhAttr(ah);
        qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.RQ_PSN | DocaVerbsQpAttr.DEST_QP_NUM | DocaVerbsQpAttr.MIN_RNR_TIMER
                | DocaVerbsQpAttr.PATH_MTU | DocaVerbsQpAttr.AH_ATTR);
        a.setNextState(DocaVerbsQpAttr.QP_STATE_RTS);
        a.setAckTimeout(14);
        a.setRetryCnt(7);
        a.setRnrRetry(1);
        qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.SQ_PSN | DocaVerbsQpAttr.ACK_TIMEOUT | DocaVerbsQpAttr.RETRY_CNT
                | DocaVerbsQpAttr.RNR_RETRY);
    }

    @Test
    public void theVerbsInitiatorTargetSampleRunsOnTheContainersBlueField3() throws Exception {
        AddressSpace p = mm.createProcess("itest-doca-verbs");
        p.setMemlockLimit(1L << 30);
        try {
            DocaDev dev = null;
            for (DocaDevinfo i : DocaDevinfo.createList(p, devices, DocaDevinfo.pciAddrOfServices(context))) {
                if (dev == null && i.getIbdevName().startsWith("mlx5_")) {
                    DocaDev d = DocaDev.open(i);
                    if (DocaDpa.capIsSupported(d)) {
                        dev = d;
                    } else {
                        d.close();
                    }
                }
            }
            assertTrue("a BlueField-3", dev != null);
            DocaDpa dpa = DocaDpa.create(dev);
            dpa.setApp(VerbsInitiatorTargetProgsStubs.APP);
            dpa.start();
            List<Runnable> undo = new ArrayList<>();
            Side tgt = side(dev, dpa, false, undo);
            Side ini = side(dev, dpa, true, undo);
            connect(dev, tgt.qp(), ini.qp().getQpn());
            connect(dev, ini.qp(), tgt.qp().getQpn());
            dpa.h2dMemcpy(ini.buf(), le(START_VALUE));
            dpa.h2dMemcpy(tgt.arg() + A_LOCAL, le(tgt.buf(), ini.buf(), tgt.mkey(), ini.mkey(), 8));
            dpa.h2dMemcpy(ini.arg() + A_LOCAL, le(ini.buf(), tgt.buf(), ini.mkey(), tgt.mkey(), 8));
            dpa.rpc(VerbsInitiatorTargetProgsStubs.TARGET_TRIGGER_FIRST_ITERATION, tgt.handle(), tgt.buf(), tgt.mkey(), 8, tgt.arg());
            dpa.rpc(VerbsInitiatorTargetProgsStubs.INITIATOR_TRIGGER_FIRST_ITERATION, ini.handle(), ini.buf(), ini.mkey(), 8, tgt.buf(),
                    tgt.mkey(), ini.arg());
            tgt.ev().waitGt(9, -1L, Duration.ofSeconds(60));
            ini.ev().waitGt(9, -1L, Duration.ofSeconds(60));
            ByteBuffer b = ByteBuffer.wrap(dpa.d2hMemcpy(ini.buf(), 8)).order(ByteOrder.LITTLE_ENDIAN);
            assertEquals("the initiator's buffer after the sample", END_VALUE, b.getLong(0));
            b = ByteBuffer.wrap(dpa.d2hMemcpy(ini.arg() + A_STATUS, 8)).order(ByteOrder.LITTLE_ENDIAN);
            assertEquals("return_status", 0, b.getLong(0));
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
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
