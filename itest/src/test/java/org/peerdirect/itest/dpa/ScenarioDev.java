package org.peerdirect.itest.dpa;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevMsg;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@code DpaScenariosIT} (DPA_MODEL.md §4 scenarios 1, 3 and 4), built by dpacc
 * from the test tree into {@code META-INF/dpa/itest_dpa_scenarios.dpaimg} (flexio-dev linked); the
 * Pax Exam probe carries the image beside {@code ScenarioDevStubs}. Each mutant sits beside the
 * code it breaks.
 *
 * <p>Window handlers' argument ({@link #W_WINDOW} ...): window id, mkey, host address, the
 * configuration's result, what the handler saw or counted, a stop word and a ready word.
 */
@DpaApp("itest_dpa_scenarios")
public final class ScenarioDev {

    public static final int W_WINDOW = 0, W_MKEY = 8, W_HADDR = 16, W_RC = 24, W_SEEN = 32, W_STOP = 40, W_READY = 48, W_SIZE = 64;

    private ScenarioDev() {
    }

    // ---------------------------------------------------------------- scenario 1: FlexIO RPC

    /** {@code __dpa_rpc__ rpc_calculate(a, b, stream)}: prints the sum on the stream (FlexIO's RPC sample), returns it. */
    @DpaRpc("rpc_calculate")
    static long calculate(long a, long b, long stream) {
        FlexioDevMsg.msg(stream, FlexioDevMsg.INFO, "rpc_calculate: " + a + " + " + b + " = " + (a + b));
        return a + b;
    }

    /** {@code __dpa_rpc__ rpc_add(a, b)}: a + b, no stream (a process that still answers). */
    @DpaRpc("rpc_add")
    static long add(long a, long b) {
        return a + b;
    }

    /** The mutant: {@code flexio_dev_error(code)}, never returns. */
    @DpaRpc("rpc_fail")
    static long fail(int code) {
        FlexioDev.error(code);
        return 0;
    }

    // ---------------------------------------------------------------- scenario 3: a window into host memory

    /** {@code __dpa_rpc__ rpc_activate(thread)}: {@code flexio_dev_event_handler_activate}; 0 when the RTOS took it. */
    @DpaRpc("rpc_activate")
    static long activate(int thread) {
        return FlexioDev.eventHandlerActivate(thread);
    }

    /** {@code __dpa_rpc__ rpc_read(daddr)}: the heap word at {@code daddr}. */
    @DpaRpc("rpc_read")
    static long read(long daddr) {
        return Dpa.ld64(daddr);
    }

    /** Configures window entity 0 with the argument's window and mkey; its DPA address of the host address, 0 when refused. */
    private static long acquire(long arg) {
        int rc = FlexioDev.windowConfig(FlexioDev.WINDOW_ENTITY_0, (int) Dpa.ld64(arg + W_WINDOW), (int) Dpa.ld64(arg + W_MKEY));
        Dpa.st64(arg + W_RC, rc == FlexioDev.STATUS_SUCCESS ? 0 : 0x100 + FlexioDev.getAndRstErrno());
        return rc == FlexioDev.STATUS_SUCCESS ? FlexioDev.windowPtrAcquire(FlexioDev.WINDOW_ENTITY_0, Dpa.ld64(arg + W_HADDR)) : 0;
    }

    /** {@code __dpa_rpc__ window_write(arg, value)}: the value into host memory, written back; the configuration's result. */
    @DpaRpc("window_write")
    static long windowWrite(long arg, long value) {
        long p = acquire(arg);
        if (p != 0) {
            Dpa.st64(p, value);
            Dpa.windowWriteback();
        }
        return Dpa.ld64(arg + W_RC);
    }

    /** The mutant (C3): the store never written back. */
    @DpaRpc("window_write_no_writeback")
    static long windowWriteNoWriteback(long arg, long value) {
        long p = acquire(arg);
        if (p != 0) {
            Dpa.st64(p, value);
        }
        return Dpa.ld64(arg + W_RC);
    }

    /** {@code __dpa_global__ poll_flag}: polls a host word with read-invalidate until it is not 0, keeps it at {@link #W_SEEN}. */
    @DpaGlobal("poll_flag")
    static void pollFlag(long arg) {
        long p = acquire(arg);
        if (p != 0) {
            long v;
            while ((v = Dpa.ld64(p)) == 0) {
                Dpa.windowReadInv();
            }
            Dpa.st64(arg + W_SEEN, v);
            Dpa.memoryWriteback();
        }
        FlexioDev.threadFinish();
    }

    /** The mutant (C4): polls the host word without {@code __dpa_thread_window_read_inv}, so it reads its stale line forever. */
    @DpaGlobal("poll_no_inv")
    static void pollNoInv(long arg) {
        long p = acquire(arg);
        if (p != 0) {
            long v = Dpa.ld64(p); // the first read fills the window line; then the host may set the flag
            Dpa.st64(arg + W_READY, 1);
            Dpa.memoryWriteback();
            while (v == 0) {
                Dpa.compilerBarrier();
                v = Dpa.ld64(p);
            }
            Dpa.st64(arg + W_SEEN, v);
            Dpa.memoryWriteback();
        }
        FlexioDev.threadFinish();
    }

    // ---------------------------------------------------------------- scenario 4: isolation and lifetime

    /** {@code __dpa_rpc__ ring_foreign(outbox, qpn)}: rings {@code SXD_DB} through this process's outbox naming {@code qpn}. */
    @DpaRpc("ring_foreign")
    static long ringForeign(int outbox, int qpn) {
        FlexioDev.outboxConfig(outbox);
        FlexioDev.qpSqRingDb(1, qpn);
        return 0;
    }

    /** {@code __dpa_global__ spin_window}: counts into host memory through the window, written back, until the stop word or the end. */
    @DpaGlobal("spin_window")
    static void spinWindow(long arg) {
        long p = acquire(arg);
        long n = 0;
        while (p != 0 && Dpa.ld64(arg + W_STOP) == 0) {
            Dpa.st64(p, ++n);
            Dpa.windowWriteback();
            Dpa.st64(arg + W_SEEN, n);
            Dpa.memoryWriteback();
        }
        FlexioDev.threadFinish();
    }
}
