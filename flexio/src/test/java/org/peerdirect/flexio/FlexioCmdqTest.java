package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvContext;

/** The command queue: tasks wait while PENDING, run in order once RUNNING, and a failing task stops the queue. */
class FlexioCmdqTest {

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

    static void awaitEmpty(FlexioCmdq q) {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!q.isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "the cmdq drained within 30 s");
            Thread.onSpinWait();
        }
    }

    @Test
    void pendingTasksRunInOrderOnceRunning() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            long word = p.copyFromHost(new byte[8]);
            try (FlexioCmdq q = FlexioCmdq.create(p, new FlexioCmdq.Attr(2, 4, FlexioCmdq.State.PENDING))) {
                for (int i = 1; i <= 10; i++) {
                    q.taskAdd(TestApps.ADD_TO, word, (long) i);
                }
                assertEquals(0, p.call(TestApps.READ, word), "nothing ran while PENDING");
                assertTrue(!q.isEmpty());
                q.stateRunning();
                awaitEmpty(q);
                assertEquals(10, q.tasksDone());
                assertEquals(55, p.call(TestApps.READ, word));
                assertThrows(IllegalArgumentException.class, () -> q.taskAdd(TestApps.ADD_TO, word), "the packer's check at add");
            }
        }
    }

    @Test
    void aFailingTaskStopsTheQueue() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            long word = p.copyFromHost(new byte[8]);
            try (FlexioCmdq q = FlexioCmdq.create(p, new FlexioCmdq.Attr(1, 1, FlexioCmdq.State.RUNNING))) {
                q.taskAdd(TestApps.ADD_TO, word, 5L);
                q.taskAdd(TestApps.FAIL, 0xa1L);
                q.taskAdd(TestApps.ADD_TO, word, 7L);
                awaitEmpty(q);
                assertNotNull(q.failure());
                assertTrue(q.failure().getMessage().contains("0xa1"), q.failure().getMessage());
                assertEquals(1, q.tasksDone());
                assertEquals(FlexioStatus.ERR_USER_ERROR, p.errStatusGet());
                assertEquals(FlexioStatus.FAILED, assertThrows(FlexioException.class, () -> q.taskAdd(TestApps.ADD_TO, word, 1L)).status());
            }
        }
    }
}
