package org.peerdirect.flexio;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.flexio.dev.FlexioDevMsg;
import org.peerdirect.flexio.dev.FlexioDevRpc;
import org.peerdirect.flexio.progs.BadProgs;
import org.peerdirect.flexio.progs.RpcProgs;
import org.peerdirect.hca.dpa.ImagePackager;

/**
 * The tests' DPA applications, hand-written as dpacc will generate them: the image (the program's
 * classes with flexio-dev statically linked) and a {@link FlexioFunc} per entry whose packer lays
 * {@code uint64_t} arguments out little-endian.
 */
final class TestApps {

    private TestApps() {
    }

    /** A packer of {@code n} {@code uint64_t} arguments (Long or Integer), refusing another count or type. */
    static FlexioFunc.Packer longs(String name, int n) {
        return args -> {
            if (args.length != n) {
                throw new IllegalArgumentException(name + " takes " + n + " arguments, not " + args.length);
            }
            ByteBuffer b = ByteBuffer.allocate(8 * n).order(ByteOrder.LITTLE_ENDIAN);
            for (Object a : args) {
                if (!(a instanceof Long || a instanceof Integer)) {
                    throw new IllegalArgumentException(name + ": a uint64_t argument, not " + a);
                }
                b.putLong(((Number) a).longValue());
            }
            return b.array();
        };
    }

    static FlexioFunc rpc(String name, int args) {
        return new FlexioFunc(name, FlexioFunc.Kind.RPC, 8 * args, longs(name, args));
    }

    static final FlexioFunc CALCULATE = rpc("rpc_calculate", 2);
    static final FlexioFunc FAIL = rpc("rpc_fail", 1);
    static final FlexioFunc CALCULATE_PRINT = rpc("rpc_calculate_print", 3);
    static final FlexioFunc PRINT_MANY = rpc("rpc_print_many", 2);
    static final FlexioFunc COPY = rpc("rpc_copy", 2);
    static final FlexioFunc ADD_TO = rpc("rpc_add_to", 2);
    static final FlexioFunc TO_HOST = rpc("rpc_to_host", 5);
    static final FlexioFunc PRINT_NO_WRITEBACK = rpc("rpc_print_no_writeback", 1);
    static final FlexioFunc READ = rpc("rpc_read", 1);
    static final FlexioFunc ACTIVATE = rpc("rpc_activate", 1);
    static final FlexioFunc SPIN = new FlexioFunc("spin_handler", FlexioFunc.Kind.GLOBAL, 8, longs("spin_handler", 1));
    static final FlexioFunc COUNT = new FlexioFunc("count_handler", FlexioFunc.Kind.GLOBAL, 8, longs("count_handler", 1));
    static final FlexioFunc SPIN_WINDOW = new FlexioFunc("spin_window_handler", FlexioFunc.Kind.GLOBAL, 8, longs("spin_window_handler", 1));

    /** flexio-dev, statically linked, with its RPC handler's entry (as dpacc links it). */
    static ImagePackager linked() {
        return new ImagePackager().add(FlexioDev.class).add(FlexioDevQueue.class).add(FlexioDevMsg.class).add(FlexioDevRpc.class)
                .global(FlexioDevRpc.SYMBOL, FlexioDevRpc.class, "rpcHandler");
    }

    static FlexioApp rpcApp() {
        byte[] image = linked().add(RpcProgs.class)
                .rpc("rpc_calculate", RpcProgs.class, "rpcCalculate", 16)
                .rpc("rpc_fail", RpcProgs.class, "rpcFail", 8)
                .rpc("rpc_calculate_print", RpcProgs.class, "rpcCalculatePrint", 24)
                .rpc("rpc_print_many", RpcProgs.class, "rpcPrintMany", 16)
                .rpc("rpc_copy", RpcProgs.class, "rpcCopy", 16)
                .rpc("rpc_add_to", RpcProgs.class, "rpcAddTo", 16)
                .rpc("rpc_to_host", RpcProgs.class, "rpcToHost", 40)
                .rpc("rpc_print_no_writeback", RpcProgs.class, "rpcPrintNoWriteback", 8)
                .rpc("rpc_read", RpcProgs.class, "rpcRead", 8)
                .rpc("rpc_activate", RpcProgs.class, "rpcActivate", 8)
                .global("count_handler", RpcProgs.class, "countHandler")
                .global("spin_handler", RpcProgs.class, "spinHandler")
                .global("spin_window_handler", RpcProgs.class, "spinWindowHandler").pack();
        return FlexioApp.create("flexio_rpc", image, List.of(CALCULATE, FAIL, CALCULATE_PRINT, PRINT_MANY, COPY, ADD_TO, TO_HOST, PRINT_NO_WRITEBACK, READ, ACTIVATE, COUNT, SPIN,
                SPIN_WINDOW));
    }

    static final FlexioFunc CLOCK = rpc("rpc_clock", 0);

    static FlexioApp badApp() {
        byte[] image = linked().add(BadProgs.class).rpc("rpc_clock", BadProgs.class, "rpcClock", 0).pack();
        return FlexioApp.create("flexio_bad", image, List.of(CLOCK));
    }
}
