package org.peerdirect.hca.engine;

import java.util.List;

import org.peerdirect.hca.boards.SiliconView;

/** A lab's view of one {@link HcaDevice} ({@link HcaDevice#view}): its counters and tables as they are when asked. */
final class HcaView implements SiliconView {

    private final HcaDevice dev;

    HcaView(HcaDevice dev) {
        this.dev = dev;
    }

    @Override
    public String name() {
        return dev.name();
    }

    @Override
    public int mptCount() {
        return dev.mptCount();
    }

    @Override
    public int cqCount() {
        return dev.cqCount();
    }

    @Override
    public List<Qp> qps() {
        return dev.qps().stream().map(q -> new Qp(q.qpn(), q.serviceType(), q.state().code, q.outstandingSends())).toList();
    }

    @Override
    public long rnrNaks() {
        return dev.rnrNaks();
    }

    @Override
    public long transportRetries() {
        return dev.transportRetries();
    }

    @Override
    public long cqOverruns() {
        return dev.cqOverruns();
    }

    @Override
    public long engineFailures() {
        return dev.engineFailures();
    }

    @Override
    public void setPortActive(int port, boolean up) {
        dev.setPortActive(port, up);
    }

    @Override
    public String toString() {
        return "view of " + dev.name();
    }
}
