package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.peerdirect.dpa.samples.dev.VerbsInitiatorTargetDev.*;
import static org.peerdirect.itest.DocaRun.le;

import java.time.Duration;


import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.verbs.DocaVerbsAhAttr;
import org.peerdirect.doca.verbs.DocaVerbsQp;
import org.peerdirect.doca.verbs.DocaVerbsQpAttr;
import org.peerdirect.doca.verbs.DocaVerbsQpInitAttr;
import org.peerdirect.dpa.samples.dev.VerbsInitiatorTargetDevStubs;
import org.peerdirect.flexio.FlexioQp;

/**
 * DOCA Verbs with its data path on the DPA inside Felix (DPA_MODEL.md §4 scenario 8, DOCA's
 * {@code dpa_verbs_initiator_target}) through the bundles: on the container's BlueField-3 two
 * DOCA verbs RC QPs RESET→RTS with the sample's masks, each with a completion context and a polling
 * thread; the initiator's value goes round three times and ends at 0xf, both events pass 9;
 * everything destroyed with {@link DocaRun}'s checks (no context of the process, nothing pinned,
 * no DPA process, the IOMMU audit clean). The device code is dpa-samples' {@code VerbsInitiatorTargetDev}
 * (the same as doca-verbs' tests run).
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaVerbsIT extends DocaIt {

    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;

    /** One side: its QP's DPA handle, buffer, map key, event and argument block. */
    private record Side(DocaVerbsQp qp, long handle, long buf, int mkey, DocaSyncEvent ev, long arg) {
    }

    private static Side side(DocaRun r, boolean initiator) {
        long buf = r.alloc(8);
        int mkey = r.dpaMap(buf, 8, RW);
        long arg = r.alloc(A_SIZE);
        DocaDpaThread t = DocaDpaThread.create(r.dpa);
        r.undo.add(t::destroy);
        t.setFuncArg(initiator ? VerbsInitiatorTargetDevStubs.INITIATOR_THREAD : VerbsInitiatorTargetDevStubs.TARGET_THREAD, arg);
        t.start();
        DocaDpaCompletion comp = DocaDpaCompletion.create(r.dpa, 4);
        r.undo.add(comp::destroy);
        comp.setThread(t);
        comp.start();
        t.run();
        DocaVerbsQpInitAttr ia = DocaVerbsQpInitAttr.create();
        ia.setExternalDatapathEn(true);
        ia.setPd(r.dev);
        ia.setSqWr(4);
        ia.setRqWr(4);
        ia.setSendDpaCompletion(comp);
        ia.setReceiveDpaCompletion(comp);
        DocaVerbsQp qp = DocaVerbsQp.create(r.dev, ia);
        ia.destroy();
        r.undo.add(qp::destroy);
        DocaSyncEvent ev = r.dpaEvent();
        r.dpa.h2dMemcpy(arg, le(comp.getDpaHandle(), qp.getDpaHandle(r.dpa), ev.getDpaHandle(r.dpa), 10));
        return new Side(qp, qp.getDpaHandle(r.dpa), buf, mkey, ev, arg);
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
    public void theVerbsInitiatorTargetSampleRunsOnTheContainersBlueField3() {
        try (DocaRun r = run("itest-doca-verbs", VerbsInitiatorTargetDevStubs.APP)) {
            Side tgt = side(r, false);
            Side ini = side(r, true);
            connect(r.dev, tgt.qp(), ini.qp().getQpn());
            connect(r.dev, ini.qp(), tgt.qp().getQpn());
            r.dpa.h2dMemcpy(ini.buf(), le(START_VALUE));
            r.dpa.h2dMemcpy(tgt.arg() + A_LOCAL, le(tgt.buf(), ini.buf(), tgt.mkey(), ini.mkey(), 8));
            r.dpa.h2dMemcpy(ini.arg() + A_LOCAL, le(ini.buf(), tgt.buf(), ini.mkey(), tgt.mkey(), 8));
            r.dpa.rpc(VerbsInitiatorTargetDevStubs.TARGET_TRIGGER_FIRST_ITERATION, tgt.handle(), tgt.buf(), tgt.mkey(), 8, tgt.arg());
            r.dpa.rpc(VerbsInitiatorTargetDevStubs.INITIATOR_TRIGGER_FIRST_ITERATION, ini.handle(), ini.buf(), ini.mkey(), 8, tgt.buf(),
                    tgt.mkey(), ini.arg());
            tgt.ev().waitGt(9, -1L, Duration.ofSeconds(60));
            ini.ev().waitGt(9, -1L, Duration.ofSeconds(60));
            assertEquals("the initiator's buffer after the sample", END_VALUE, r.words(ini.buf(), 1)[0]);
            assertEquals("return_status", 0, r.words(ini.arg() + A_STATUS, 1)[0]);
        }
    }
}
