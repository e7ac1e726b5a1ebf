package org.peerdirect.ib.core.uverbs;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.ib.core.objects.UverbsObjects;
import org.peerdirect.ib.core.umem.IbAccess;

/**
 * A device's open contexts as {@link UverbsObjects} records: reads of the copy-on-write lists
 * each object keeps, no lock taken (a context closing meanwhile may still be listed).
 */
public final class UverbsSnapshot {

    private UverbsSnapshot() {
    }

    public static List<UverbsObjects.Context> of(IbDevice dev) {
        List<UverbsObjects.Context> out = new ArrayList<>();
        for (UContext c : dev.contexts()) {
            List<UverbsObjects.Mr> mrs = new ArrayList<>();
            List<UverbsObjects.Qp> qps = new ArrayList<>();
            for (UPd pd : c.pds) {
                for (UMr mr : pd.mrs) {
                    mrs.add(mr(mr));
                }
                for (UQp qp : pd.qps) {
                    qps.add(new UverbsObjects.Qp(qp.qpNum(), qp.qpType().name(), qp.state().name()));
                }
            }
            for (UQp qp : c.xrcQps) {
                qps.add(new UverbsObjects.Qp(qp.qpNum(), qp.qpType().name(), qp.state().name()));
            }
            List<UverbsObjects.Cq> cqs = c.cqs.stream().map(q -> new UverbsObjects.Cq(q.cqe())).toList();
            out.add(new UverbsObjects.Context(dev.name(), c.process.pid(), c.process.name(), c.pds.size(), mrs, qps, cqs));
        }
        return out;
    }

    private static UverbsObjects.Mr mr(UMr mr) {
        try {
            return describe(mr);
        } catch (RuntimeException e) {
            // deregistered between the check and the driver's answer
            return new UverbsObjects.Mr(0, 0, mr.addr(), mr.length(), mr.access(), UverbsObjects.Kind.PINNED, UverbsObjects.State.DEREGISTERED);
        }
    }

    private static UverbsObjects.Mr describe(UMr mr) {
        UverbsObjects.Kind kind;
        if (mr.dmabuf) {
            kind = UverbsObjects.Kind.DMA_BUF;
        } else if (mr.isPeer()) {
            kind = UverbsObjects.Kind.PEER;
        } else if ((mr.access() & IbAccess.ON_DEMAND) != 0) {
            kind = mr.addr() == 0 && mr.length() == -1L ? UverbsObjects.Kind.ODP_IMPLICIT : UverbsObjects.Kind.ODP_EXPLICIT;
        } else {
            kind = UverbsObjects.Kind.PINNED;
        }
        UverbsObjects.State state = mr.released() ? UverbsObjects.State.DEREGISTERED
                : mr.invalidated() ? UverbsObjects.State.INVALIDATED : UverbsObjects.State.LIVE;
        int lkey = mr.released() ? 0 : mr.lkey();
        int rkey = mr.released() ? 0 : mr.rkey();
        return new UverbsObjects.Mr(lkey, rkey, mr.addr(), mr.length(), mr.access(), kind, state);
    }
}
