package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvEventType;
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

    /**
     * {@code rdma:asyncwatch} prints the port events of the device while it watches: the link is
     * pulled once its context is open (the core counts it), so the event cannot come before it.
     */
    @Test
    void asyncwatchPrintsThePortEventsWhileItWatches() throws Exception {
        var out = new java.util.concurrent.atomic.AtomicReference<Object>();
        int before = m.core.openContexts(m.devs.get(1));
        Thread t = Thread.ofPlatform().name("asyncwatch").start(() -> {
            try {
                out.set(m.tools().asyncwatch("-d", "mlx5_1", "-t", "10000", "-n", "1"));
            } catch (Exception | AssertionError e) {
                out.set(e);
            }
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (m.core.openContexts(m.devs.get(1)) == before) {
            assertTrue(System.nanoTime() < deadline && t.isAlive(), "asyncwatch opens its context: " + out.get());
            Thread.onSpinWait();
        }
        setLink(1, false);
        t.join(10_000);
        // once seen in CI (1 of ~40 runs, not reproduced in 6 more): the watcher's one event was a
        // PORT_ACTIVE, which nothing in this machine should raise before the link comes back; the
        // models' state goes with the message so a recurrence says more
        assertTrue(out.get() instanceof String s && s.contains("event_type IBV_EVENT_PORT_ERR (10), port_num 1"),
                () -> out.get() + "\n" + m.models.get(0).describe() + "\n" + m.models.get(1).describe() + "\ndevices " + m.devs);
        // the PORT_ACTIVE of the link coming back travels as an EQE after setLink returns: a
        // context of the test's own waits for it, so it was dispatched before the quiet watch
        // opens its context (seen under load: the quiet watch caught it)
        IbvContext witness = m.devs.get(1).open(m.proc);
        try {
            setLink(1, true);
            IbvAsyncEvent e = witness.getAsyncEvent(10, TimeUnit.SECONDS);
            assertEquals(IbvEventType.PORT_ACTIVE, e == null ? null : e.type(), "the link came back: " + e);
        } finally {
            witness.close();
        }
        String quiet = m.tools().asyncwatch("-d", "mlx5_1", "-t", "20");
        assertTrue(quiet.contains("no event within 20 ms"), quiet);
    }

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
