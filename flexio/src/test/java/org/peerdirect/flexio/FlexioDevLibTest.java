package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.flexio.progs.DevLibProgs;
import org.peerdirect.flexio.progs.RpcProgs;
import org.peerdirect.ib.core.verbs.IbvContext;

/** flexio-dev's calls on the silicon: the zero CQE triggering a CQ's handler, process finish, the copies and trylock. */
class FlexioDevLibTest {

    @TempDir
    Path tmp;
    FlexioMachine m;
    IbvContext ctx;

    @BeforeEach
    void up() {
        m = new FlexioMachine(tmp);
        ctx = m.open();
    }

    @AfterEach
    void down() {
        ctx.close();
        m.close();
    }

    static final FlexioFunc ZCQE = TestApps.rpc("rpc_zcqe", 2);
    static final FlexioFunc FINISH = TestApps.rpc("rpc_finish", 0);
    static final FlexioFunc LIB = TestApps.rpc("rpc_lib", 3);
    static final FlexioFunc RETRIGGER = new FlexioFunc("retrigger_handler", FlexioFunc.Kind.GLOBAL, 8, TestApps.longs("r", 1));
    static final FlexioFunc YIELD = new FlexioFunc("yield_handler", FlexioFunc.Kind.GLOBAL, 8, TestApps.longs("y", 1));
    static final FlexioFunc COUNTER = new FlexioFunc("cqe_counter", FlexioFunc.Kind.GLOBAL, 8, TestApps.longs("cqe_counter", 1));

    static FlexioApp app() {
        byte[] image = TestApps.linked().add(DevLibProgs.class).add(RpcProgs.class)
                .rpc("rpc_zcqe", DevLibProgs.class, "rpcZcqe", 16).rpc("rpc_finish", DevLibProgs.class, "rpcFinish", 0)
                .rpc("rpc_lib", DevLibProgs.class, "rpcLib", 24).global("cqe_counter", DevLibProgs.class, "cqeCounter")
                .global("retrigger_handler", DevLibProgs.class, "retriggerHandler")
                .global("yield_handler", DevLibProgs.class, "yieldHandler")
                .rpc("rpc_activate", DevLibProgs.class, "rpcActivate", 8)
                .rpc("rpc_read", RpcProgs.class, "rpcRead", 8).pack();
        return FlexioApp.create("flexio_devlib", image, List.of(ZCQE, FINISH, LIB, COUNTER, RETRIGGER, YIELD, TestApps.ACTIVATE,
                TestApps.READ));
    }

    @Test
    void aZeroCqeTriggersTheCqsHandlerOnceEach() {
        try (FlexioProcess p = FlexioProcess.create(ctx, app(), FlexioRpcTest.ATTR)) {
            long ring = p.bufDevAlloc(64 * 64);
            long dbr = p.bufDevAlloc(64);
            long c = p.bufDevAlloc(64);
            byte[] cqes = new byte[64 * 64];
            for (int i = 63; i < cqes.length; i += 64) {
                cqes[i] = (byte) 0xf1;
            }
            p.host2devMemcpy(cqes, ring);
            FlexioOutbox outbox = FlexioOutbox.create(p);
            FlexioEventHandler h = FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(COUNTER, c));
            FlexioCq cq = FlexioCq.create(p, new FlexioCq.Attr(6, FlexioCq.ElementType.DPA_THREAD, h, ring, dbr));
            p.host2devMemcpy(ByteBuffer.allocate(48).order(ByteOrder.LITTLE_ENDIAN).putLong(outbox.id()).putLong(cq.cqNum())
                    .putLong(ring).putLong(dbr).array(), c);
            h.run();
            for (int i = 1; i <= 3; i++) {
                assertEquals(0, p.call(ZCQE, (long) outbox.id(), (long) cq.cqNum()));
                FlexioRpcTest.awaitCount(p, c + 40, i);
            }
            assertEquals(3, h.activations(), "one activation per zero CQE");
            assertTrue(m.bf3.dpaThreads().stream().anyMatch(l -> l.contains("cqe_counter") && l.contains("armed")), m.bf3.dpaThreads().toString());
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
        }
    }

    @Test
    void retriggerRunsTheHandlerAgainAtOnce() {
        try (FlexioProcess p = FlexioProcess.create(ctx, app(), FlexioRpcTest.ATTR)) {
            long word = p.copyFromHost(new byte[8]);
            FlexioEventHandler h = FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(RETRIGGER, word));
            h.run();
            assertEquals(0, p.call(TestApps.ACTIVATE, (long) h.id()));
            FlexioRpcTest.awaitCount(p, word, 3);
            assertEquals(0, p.call(TestApps.ACTIVATE, (long) h.id()));
            FlexioRpcTest.awaitCount(p, word, 6);
            assertEquals(6, h.activations(), "two triggers, each retriggered twice");
        }
    }

    @Test
    void aContinuableHandlerResumesAfterEachYield() {
        try (FlexioProcess p = FlexioProcess.create(ctx, app(), FlexioRpcTest.ATTR)) {
            long word = p.copyFromHost(new byte[8]);
            FlexioEventHandler h = FlexioEventHandler.create(p, new FlexioEventHandler.Attr(YIELD, true, word, 0,
                    FlexioEventHandler.AffinityType.NONE, 0));
            h.run();
            long[] want = {1, 11, 111};
            for (long w : want) {
                assertEquals(0, p.call(TestApps.ACTIVATE, (long) h.id()));
                FlexioRpcTest.awaitCount(p, word, w);
            }
        }
    }

    @Test
    void copiesAndTrylock() {
        try (FlexioProcess p = FlexioProcess.create(ctx, app(), FlexioRpcTest.ATTR)) {
            long src = p.copyFromHost(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0x1111_2222_3333_4444L).array());
            long dst = p.bufDevAlloc(16);
            long lock = p.bufDevAlloc(8);
            assertEquals(2 * 0x1111_2222_3333_4444L + 0b101, p.call(LIB, src, dst, lock), "both copies whole; trylock 1, 0, then 1");
        }
    }

    @Test
    void processFinishEndsTheProcessWithoutAnError() {
        try (FlexioProcess p = FlexioProcess.create(ctx, app(), FlexioRpcTest.ATTR)) {
            FlexioException e = assertThrows(FlexioException.class, () -> p.call(FINISH));
            assertTrue(e.getMessage().contains("status 0x40"), e.getMessage());
            assertEquals(0x40, p.processStatus());
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), "flexio_dev_process_finish is no error");
        }
    }
}
