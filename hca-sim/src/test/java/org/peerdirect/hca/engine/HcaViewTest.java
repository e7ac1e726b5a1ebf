package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.boards.SiliconView;

/** What a lab sees of the silicon ({@link HcaDevice#view}), and the fabric's ports that are no engine's. */
class HcaViewTest extends EngineRig {

    @Test
    void theViewShowsTheTablesAndTheQpContextsAsTheEngineHoldsThem() {
        Side a = new Side(0);
        Side b = new Side(1);
        SiliconView v = a.dev.view();
        assertEquals(a.dev.name(), v.name());
        assertEquals(1, v.mptCount());
        assertEquals(1, v.cqCount());
        assertEquals(List.of(new SiliconView.Qp(a.qp.qpn, HcaDevice.ST_RC, HwQpState.RST.code, 0)), v.qps());
        a.connect(b);
        b.connect(a);
        assertEquals(HwQpState.RTS.code, v.qps().get(0).state(), "asked again: the context as it is now");
        a.dev.sw2hwMpt(1, a.va, 4096, ALL, new long[] {a.iova}, new long[] {4096});
        assertEquals(2, v.mptCount());
        a.wqe(Wqe.OP_SEND, a.va, 8);
        a.ring();
        assertEquals(Cqe.SYNDROME_RNR_RETRY_EXC_ERR, awaitCqe(a).syndrome);
        assertEquals(a.dev.rnrNaks(), v.rnrNaks());
        assertTrue(v.rnrNaks() > 0);
        // the error CQE is written before the QP moves to ERR (rxe_comp.c: do_complete, then rxe_qp_error)
        WireTest.awaitState(a, HwQpState.ERR);
        assertEquals(HwQpState.ERR.code, v.qps().get(0).state());
        assertEquals(0, v.engineFailures());
    }

    @Test
    void pullingACableThroughTheViewTakesThePortDownAndBlocksTraffic() {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        b.dev.view().setPortActive(1, false);
        assertFalse(b.dev.port(1).active());
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 8);
        w.remoteAddr = b.va;
        w.rkey = b.key;
        a.ring();
        assertEquals(Cqe.SYNDROME_TRANSPORT_RETRY_EXC_ERR, awaitCqe(a).syndrome);
        assertEquals(4, a.dev.view().transportRetries(), "the first try and three retries (retry_count 3)");
        b.dev.view().setPortActive(1, true);
        assertTrue(b.dev.port(1).active());
    }

    @Test
    void aPortOnTheFabricThatIsNoEnginesIsUnreachable() {
        Side a = new Side(0);
        Side b = new Side(1);
        int[] lid = new int[1];
        Fabric.Port stranger = () -> lid[0]; // a port of something else on the subnet (a switch's, a host's)
        lid[0] = fabric.attach(stranger);
        QpContext c = new QpContext();
        c.remoteAccess = QpContext.BIT_RWE;
        c.retryCount = 1;
        c.ackTimeout = 1;
        a.qp.modify(QpCommand.RST2INIT, c);
        c.dlid = lid[0];
        c.remoteQpn = b.qp.qpn;
        a.qp.modify(QpCommand.INIT2RTR, c);
        a.qp.modify(QpCommand.RTR2RTS, c);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 8);
        w.remoteAddr = b.va;
        w.rkey = b.key;
        a.ring();
        assertEquals(Cqe.SYNDROME_TRANSPORT_RETRY_EXC_ERR, awaitCqe(a).syndrome, "lost, as a packet to a port of another kind");
        fabric.detach(stranger);
        assertEquals(null, fabric.port(lid[0]));
    }

    /** The next CQE once the requester's retries have run (bounded: 10 s). */
    private static Cqe awaitCqe(Side s) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (s.cq.producerIndex() <= s.cqCi) {
            assertTrue(System.nanoTime() < deadline, "a CQE within 10 s");
            Thread.onSpinWait();
        }
        return s.cqe();
    }
}
