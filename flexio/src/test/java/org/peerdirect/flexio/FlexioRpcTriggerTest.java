package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevMsg;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.flexio.dev.FlexioDevRpc;
import org.peerdirect.flexio.progs.FxpProgs;
import org.peerdirect.flexio.progs.RpcHandlerMutants;
import org.peerdirect.flexio.progs.RpcProgs;
import org.peerdirect.hca.dpa.ImagePackager;
import org.peerdirect.ib.core.verbs.IbvContext;

/**
 * {@code flexio_process_call}'s trigger through the data path (DPA_MODEL.md §2.5, {@link FlexioRpc}):
 * after the channel is made a call runs no firmware command (the old path ran a MODIFY and QUERYs
 * per call); the RPC handler's mailbox write-back is checked by the memory model (its mutant is
 * C3 naming the line, and the host is told the process ended, not left waiting); an image without
 * the handler and an indirect call of a non-RPC symbol are refused naming why.
 */
class FlexioRpcTriggerTest {

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

    @Test
    void aCallAfterTheFirstRunsNoFirmwareCommand() {
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), FlexioRpcTest.ATTR)) {
            assertEquals(3, p.call(TestApps.CALCULATE, 1L, 2L), "the first call makes the channel");
            long commands = m.bf3.commandsExecuted();
            long queries = p.rpcStatusQueries();
            for (long i = 0; i < 20; i++) {
                assertEquals(i + 100, p.call(TestApps.CALCULATE, i, 100L));
            }
            assertEquals(p.rpcStatusQueries() - queries, m.bf3.commandsExecuted() - commands,
                    "the only commands during calls are the status queries of slow answers");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet());
        }
    }

    @Test
    void aHandlerThatDoesNotWriteTheMailboxBackIsCaughtNamingItsLine() {
        byte[] image = new ImagePackager().add(FlexioDev.class).add(FlexioDevQueue.class).add(FlexioDevMsg.class)
                .add(FlexioDevRpc.class).add(RpcHandlerMutants.class).add(RpcProgs.class)
                .global(FlexioDevRpc.SYMBOL, RpcHandlerMutants.class, "rpcHandlerNoWriteback")
                .rpc("rpc_calculate", RpcProgs.class, "rpcCalculate", 16).pack();
        FlexioApp app = FlexioApp.create("rpc_mutant", image, List.of(TestApps.CALCULATE));
        try (FlexioProcess p = FlexioProcess.create(ctx, app, FlexioRpcTest.ATTR)) {
            FlexioException e = assertThrows(FlexioException.class, () -> p.call(TestApps.CALCULATE, 40L, 2L));
            assertEquals(FlexioStatus.FAILED, e.status(), e.getMessage());
            assertTrue(e.getMessage().contains("status 0x7"), "the strict memory model ended the process: " + e.getMessage());
            String mm = String.join("\n", m.dpa());
            assertTrue(mm.contains("C3") && mm.contains("RpcHandlerMutants.rpcHandlerNoWriteback:"), mm);
        }
    }

    /** The fxp intrinsics through the ISA: exact Q16.16 values, and their cost on the EU's cycle counter. */
    @Test
    void theFxpIntrinsicsAnswerQ16ValuesAndChargeTheirCycles() {
        FlexioFunc fxp = TestApps.rpc("rpc_fxp", 2);
        byte[] image = TestApps.linked().add(FxpProgs.class).rpc("rpc_fxp", FxpProgs.class, "rpcFxp", 16).pack();
        try (FlexioProcess p = FlexioProcess.create(ctx, FlexioApp.create("fxp", image, List.of(fxp)), FlexioRpcTest.ATTR)) {
            long log2 = p.call(fxp, 0L, 0x40000L); // log2(4.0)
            assertEquals(2 << 16, (int) log2);
            assertEquals(4 + 1, log2 >>> 32, "4 cycles for the intrinsic, 1 for the second cycles read");
            assertEquals(0x4000, (int) p.call(fxp, 1L, 0x40000L), "1/4.0");
            assertEquals(0x16a0a, (int) p.call(fxp, 2L, 0x8000L), "2^0.5 = 1.41421 (0x16a09.e6 rounded up)");
        }
    }

    @Test
    void anImageWithoutTheRpcHandlerIsToldSo() {
        byte[] image = new ImagePackager().add(FlexioDev.class).add(FlexioDevQueue.class).add(FlexioDevMsg.class).add(RpcProgs.class)
                .rpc("rpc_calculate", RpcProgs.class, "rpcCalculate", 16).pack();
        FlexioApp app = FlexioApp.create("rpc_unlinked", image, List.of(TestApps.CALCULATE));
        try (FlexioProcess p = FlexioProcess.create(ctx, app, FlexioRpcTest.ATTR)) {
            FlexioException e = assertThrows(FlexioException.class, () -> p.call(TestApps.CALCULATE, 1L, 2L));
            assertTrue(e.getMessage().contains(FlexioDevRpc.SYMBOL), e.getMessage());
        }
    }

    @Test
    void anIndirectCallOfAHandlerEndsTheProcessAsIllegal() {
        FlexioFunc calls = TestApps.rpc("rpc_calls_a_handler", 1);
        byte[] image = TestApps.linked().add(RpcHandlerMutants.class)
                .rpc("rpc_calls_a_handler", RpcHandlerMutants.class, "rpcCallsAHandler", 8).pack();
        FlexioApp app = FlexioApp.create("rpc_illegal", image, List.of(calls));
        try (FlexioProcess p = FlexioProcess.create(ctx, app, FlexioRpcTest.ATTR)) {
            FlexioException e = assertThrows(FlexioException.class, () -> p.call(calls, 0L));
            assertTrue(e.getMessage().contains("status 0x42"), e.getMessage());
            assertTrue(p.crashData().contains("0x42"), p.crashData());
            assertTrue(String.join("\n", m.dpa()).contains("no __dpa_rpc__ entry"), String.join("\n", m.dpa()));
        }
    }
}
