package org.peerdirect.flexio.progs;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/** Device code exercising flexio-dev's calls one by one (zero CQE, process finish, copies, trylock). */
public final class DevLibProgs {

    private DevLibProgs() {
    }

    /** {@code __dpa_rpc__ rpc_zcqe(outbox, cqn)}: a zero CQE on CQ {@code cqn} through the thread's outbox. */
    public static long rpcZcqe(long argbuf) {
        if (FlexioDev.outboxConfig((int) Dpa.ld64(argbuf)) != FlexioDev.STATUS_SUCCESS) {
            return 1;
        }
        FlexioDev.zcqeGen((int) Dpa.ld64(argbuf + 8));
        return 0;
    }

    /**
     * {@code __dpa_global__}: counts its activations (context: outbox, cqn, ring, dbr, ci, count),
     * consumes any CQE of its CQ (a zero CQE writes none: the model's RXT_DB only signals), writes
     * the consumer index back, re-arms and reschedules.
     */
    public static void cqeCounter(long arg) {
        FlexioDev.outboxConfig((int) Dpa.ld64(arg));
        long ring = Dpa.ld64(arg + 16);
        int ci = (int) Dpa.ld64(arg + 32);
        long n = Dpa.ld64(arg + 40) + 1;
        while (FlexioDevQueue.cqeGetOwner(FlexioDevQueue.cqeAt(ring, ci, 6)) == (ci >>> 6 & 1)) {
            ci++;
        }
        Dpa.st64(arg + 32, ci);
        Dpa.st64(arg + 40, n);
        FlexioDevQueue.dbrCqSetCi(Dpa.ld64(arg + 24), ci);
        Dpa.memoryWriteback();
        FlexioDev.cqArm(ci, (int) Dpa.ld64(arg + 8));
        FlexioDev.threadReschedule();
    }

    /** {@code __dpa_global__}: counts in the word at {@code arg}; {@code flexio_dev_thread_retrigger} until 3, then reschedules. */
    public static void retriggerHandler(long arg) {
        long n = Dpa.ld64(arg) + 1;
        Dpa.st64(arg, n);
        if (n % 3 != 0) {
            FlexioDev.threadRetrigger();
        }
        FlexioDev.threadReschedule();
    }

    /**
     * {@code __dpa_global__}, continuable: adds 1, yields, adds 10, yields, adds 100 and finishes:
     * each {@code flexio_dev_yield} resumes where it left on the next trigger.
     */
    public static void yieldHandler(long arg) {
        Dpa.st64(arg, Dpa.ld64(arg) + 1);
        FlexioDev.yield();
        Dpa.st64(arg, Dpa.ld64(arg) + 10);
        FlexioDev.yield();
        Dpa.st64(arg, Dpa.ld64(arg) + 100);
        FlexioDev.threadFinish();
    }

    /** {@code __dpa_rpc__ rpc_activate(thread)}: {@code flexio_dev_event_handler_activate}. */
    public static long rpcActivate(long argbuf) {
        return FlexioDev.eventHandlerActivate((int) Dpa.ld64(argbuf));
    }

    /** {@code __dpa_rpc__}: {@code flexio_dev_process_finish}, never returns. */
    public static long rpcFinish(long argbuf) {
        FlexioDev.processFinish();
        return 1;
    }

    /**
     * {@code __dpa_rpc__ rpc_lib(src, dst, lock)}: memcpy16 and memcpy32 of 8 bytes, then trylock
     * twice, unlock, trylock: returns the copies' words added and the three results as bits.
     */
    public static long rpcLib(long argbuf) {
        long src = Dpa.ld64(argbuf);
        long dst = Dpa.ld64(argbuf + 8);
        long lock = Dpa.ld64(argbuf + 16);
        FlexioDev.memcpy16(dst, src, 8);
        FlexioDev.memcpy32(dst + 8, src, 8);
        FlexioDev.spinInit(lock);
        int a = FlexioDev.spinTrylock(lock);
        int b = FlexioDev.spinTrylock(lock);
        FlexioDev.spinUnlock(lock);
        int c = FlexioDev.spinTrylock(lock);
        FlexioDev.spinUnlock(lock);
        return Dpa.ld64(dst) + Dpa.ld64(dst + 8) + (a << 2 | b << 1 | c);
    }
}
