package org.peerdirect.mlx4;

import java.nio.file.Path;

import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.testkit.AsyncEventContract;

/** The async-event contract on two ConnectX-3 models with mlx4 ({@link Lab}; its close is the audit). */
class Mlx4AsyncEventTest extends AsyncEventContract {

    Lab lab;

    @Override
    protected void start(Path tmp) {
        lab = new Lab(tmp, 2);
    }

    @Override
    protected IbvContext open(int dev) {
        return lab.ib.get(dev).open(lab.proc);
    }

    @Override
    protected AddressSpace process() {
        return lab.proc;
    }

    @Override
    protected void connect(IbvQp a, IbvContext ctxA, IbvQp b, IbvContext ctxB) {
        RcConnect c = new RcConnect().access(RW).minRnrTimer(1).rnrRetry(7).timeout(4, 3);
        c.connect(a, ctxB.queryPort(1).lid(), b.qpNum());
        c.connect(b, ctxA.queryPort(1).lid(), a.qpNum());
    }

    @Override
    protected void removeDevice(int dev) {
        lab.remove(dev, false);
    }

    @Override
    protected void setLink(int dev, boolean up) {
        lab.machine.engine(dev).setPortActive(1, up);
    }

    @Override
    protected void stop() {
        lab.close();
    }
}
