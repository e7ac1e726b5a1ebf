package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.List;

import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.testkit.AsyncEventContract;

/**
 * The async-event contract on two ConnectX-4 models with mlx5_core and mlx5_ib: the events
 * travel as EQEs on the async EQ ({@code mlx5_eqe_qp_srq}), the SRQ limit by {@code ARM_RQ} and
 * {@code QUERY_SRQ}. {@link Mlx5Machine#stopMachine} is the audit.
 */
class Mlx5AsyncEventTest extends AsyncEventContract {

    final Mlx5Machine m = new Mlx5Machine() {
    };

    @Override
    protected void start(Path tmp) {
        m.startMachine(tmp, "async-events", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
    }

    @Override
    protected IbvContext open(int dev) {
        return m.devs.get(dev).open(m.proc);
    }

    @Override
    protected AddressSpace process() {
        return m.proc;
    }

    @Override
    protected void connect(IbvQp a, IbvContext ctxA, IbvQp b, IbvContext ctxB) {
        RcConnect c = new RcConnect().access(RW).minRnrTimer(1).timeout(14, 7);
        c.connect(a, ctxB.queryPort(1).lid(), b.qpNum());
        c.connect(b, ctxA.queryPort(1).lid(), a.qpNum());
    }

    @Override
    protected void removeDevice(int dev) {
        m.core.unregister(m.ibs.get(dev));
    }

    @Override
    protected void setLink(int dev, boolean up) {
        m.models.get(dev).setLink(1, up);
    }

    @Override
    protected void stop() {
        List<String> leaks = m.stopMachine();
        assertEquals(List.of(), leaks, "nothing left behind");
    }
}
