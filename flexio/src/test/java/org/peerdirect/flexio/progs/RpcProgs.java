package org.peerdirect.flexio.progs;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevMsg;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of the RPC tests (DPA_MODEL.md §4 scenario 1, FlexIO's RPC sample): hand-written as
 * dpacc will generate the unpack trampolines (an RPC entry reads its packed arguments from its
 * argument buffer). Linked with flexio-dev into the image.
 */
public final class RpcProgs {

    private RpcProgs() {
    }

    /** {@code __dpa_rpc__ uint64_t rpc_calculate(uint64_t a, uint64_t b)}: a + b. */
    public static long rpcCalculate(long argbuf) {
        long a = Dpa.ld64(argbuf);
        long b = Dpa.ld64(argbuf + 8);
        return a + b;
    }

    /**
     * {@code __dpa_rpc__ uint64_t rpc_calculate_print(a, b, stream)}: prints the sum on the stream
     * (FlexIO's RPC sample), returns it.
     */
    public static long rpcCalculatePrint(long argbuf) {
        long a = Dpa.ld64(argbuf);
        long b = Dpa.ld64(argbuf + 8);
        FlexioDevMsg.msg(Dpa.ld64(argbuf + 16), FlexioDevMsg.INFO, "rpc_calculate: " + a + " + " + b + " = " + (a + b));
        FlexioDevMsg.msg(Dpa.ld64(argbuf + 16), FlexioDevMsg.DEBUG, "filtered out at level INFO");
        return a + b;
    }

    /**
     * The mutant of {@code FlexioDevMsg.msg}: the line and its index written into the host ring
     * through the window, never written back ({@code __dpa_thread_window_writeback} missing).
     */
    public static long rpcPrintNoWriteback(long argbuf) {
        long stream = Dpa.ld64(argbuf);
        Dpa.windowConfig(Dpa.WINDOW_ENTITY_1, Dpa.ld32(stream), Dpa.ld32(stream + 4));
        long ring = Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_1, Dpa.ld64(stream + 8));
        Dpa.st64(ring + 4096, 0x0a6b6f20656e696cL); // "line ok" and a newline, little-endian
        Dpa.st64(ring, 8);
        return 0;
    }

    /** {@code __dpa_rpc__}: {@code n} numbered lines on the stream. */
    public static long rpcPrintMany(long argbuf) {
        long n = Dpa.ld64(argbuf);
        long stream = Dpa.ld64(argbuf + 8);
        for (long i = 0; i < n; i++) {
            FlexioDevMsg.print(stream, "line " + i);
        }
        return n;
    }

    /** {@code __dpa_rpc__ uint64_t rpc_fail(uint64_t code)}: {@code flexio_dev_error(code)}, never returns. */
    public static long rpcFail(long argbuf) {
        FlexioDev.error((int) Dpa.ld64(argbuf));
        return 0;
    }

    /** {@code __dpa_rpc__}: copies 64 bytes within the heap by {@code flexio_dev_memcpy64}, returns their sum of words. */
    public static long rpcCopy(long argbuf) {
        long src = Dpa.ld64(argbuf);
        long dst = Dpa.ld64(argbuf + 8);
        FlexioDev.memcpy64(dst, src, 64);
        long sum = 0;
        for (int i = 0; i < 8; i++) {
            sum += Dpa.ld64(dst + 8L * i);
        }
        return sum;
    }

    /** {@code __dpa_global__}: counts its activations in the word at {@code arg} under a spinlock at {@code arg + 8}, reschedules. */
    public static void countHandler(long arg) {
        FlexioDev.spinLock(arg + 8);
        Dpa.st64(arg, Dpa.ld64(arg) + 1);
        FlexioDev.spinUnlock(arg + 8);
        FlexioDev.threadReschedule();
    }

    /** {@code __dpa_rpc__ rpc_add_to(addr, v)}: adds {@code v} to the word at {@code addr}, returns the new value. */
    public static long rpcAddTo(long argbuf) {
        long addr = Dpa.ld64(argbuf);
        long v = Dpa.ld64(addr) + Dpa.ld64(argbuf + 8);
        Dpa.st64(addr, v);
        return v;
    }

    /** {@code __dpa_global__}: spins, counting in the word at {@code arg}, until its process goes. */
    public static void spinHandler(long arg) {
        while (Dpa.ld64(arg + 8) == 0) {
            Dpa.st64(arg, Dpa.ld64(arg) + 1);
            Dpa.memoryWriteback();
        }
        FlexioDev.threadFinish();
    }

    /**
     * {@code __dpa_global__}: configures window entity 0 with the window and mkey at {@code arg} and
     * {@code arg + 8}, then stores a counter at host address {@code [arg + 16]} through it, written
     * back each time, and the same counter at {@code arg + 24} (DPA memory, written back), until the
     * word at {@code arg + 32} is set. A configuration refused leaves -1 at {@code arg + 24}.
     */
    public static void spinWindowHandler(long arg) {
        if (FlexioDev.windowConfig(FlexioDev.WINDOW_ENTITY_0, (int) Dpa.ld64(arg), (int) Dpa.ld64(arg + 8)) != FlexioDev.STATUS_SUCCESS) {
            Dpa.st64(arg + 24, -1);
            Dpa.memoryWriteback();
            FlexioDev.threadFinish();
            return;
        }
        long p = FlexioDev.windowPtrAcquire(FlexioDev.WINDOW_ENTITY_0, Dpa.ld64(arg + 16));
        long n = 0;
        while (Dpa.ld64(arg + 32) == 0) {
            Dpa.st64(p, ++n);
            Dpa.windowWriteback();
            Dpa.st64(arg + 24, n);
            Dpa.memoryWriteback();
        }
        FlexioDev.threadFinish();
    }

    /**
     * {@code __dpa_rpc__ rpc_to_host(window, mkey, haddr, daddr, n)}: configures window entity 0
     * and copies {@code n} bytes of the heap at {@code daddr} to host address {@code haddr}
     * ({@code flexio_dev_window_copy_to_host}); returns its status.
     */
    public static long rpcToHost(long argbuf) {
        if (FlexioDev.windowConfig(FlexioDev.WINDOW_ENTITY_0, (int) Dpa.ld64(argbuf), (int) Dpa.ld64(argbuf + 8)) != 0) {
            return 0x100 + FlexioDev.getAndRstErrno();
        }
        return FlexioDev.windowCopyToHost(Dpa.ld64(argbuf + 16), Dpa.ld64(argbuf + 24), (int) Dpa.ld64(argbuf + 32));
    }

    /** {@code __dpa_rpc__}: the counter of {@link #countHandler} at {@code argbuf}'s address. */
    public static long rpcRead(long argbuf) {
        return Dpa.ld64(Dpa.ld64(argbuf));
    }

    /** {@code __dpa_rpc__}: activates the handler of thread id at {@code argbuf}, 0 when the RTOS took it. */
    public static long rpcActivate(long argbuf) {
        return FlexioDev.eventHandlerActivate((int) Dpa.ld64(argbuf));
    }
}
