package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ifc.DpaObj;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.dpa.ProcessStatus;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.mlx5.dv.Mlx5dv;

/**
 * DPA_MODEL.md §4 scenario 3's peer-memory case: a DPA thread spins writing through a window whose
 * mkey is a verbs MR over GPU memory ({@code ibv_reg_mr} of a {@code cudaMalloc} range, claimed by
 * the invalidating nv_mem; the window on that MR's PD, {@code mlx5dv_init_obj}'s pdn). The GPU side
 * frees the memory: the RM's free callback invalidates, mlx5 revokes the mkey by UMR, the callback
 * returns, the RM unmaps BAR1. From then on no window byte crosses BAR1 and the writer's next access
 * faults: the process ends with WINDOW_FAULT, seen by {@code flexio_err_status_get} and by a DevX
 * event channel subscribed to the process's {@code OBJECT_CHANGE} at the mlx5dv level. The machine's
 * close checks the IOMMU audit, the firmware's pages and the GPU's memory and BAR1.
 */
class FlexioPeerWindowTest {

    static final FlexioProcess.Attr ATTR = new FlexioProcess.Attr(64 * 1024, Duration.ofSeconds(30));

    @TempDir
    Path tmp;
    FlexioMachine m;
    IbvContext ctx;

    /** A machine with the GPU and nv_mem of the flavour asked for. */
    void up(boolean persistent) {
        m = new FlexioMachine(tmp).gpu(persistent);
        ctx = m.open();
    }

    @AfterEach
    void down() {
        if (m != null) {
            ctx.close();
            m.close();
        }
    }

    /** The spinning writer's argument block in the heap: window, mkey, host address, counter, stop. */
    static long spinArg(FlexioProcess p, int window, int mkey, long haddr) {
        ByteBuffer a = ByteBuffer.allocate(40).order(ByteOrder.LITTLE_ENDIAN);
        a.putLong(0, window).putLong(8, mkey).putLong(16, haddr);
        return p.copyFromHost(a.array());
    }

    static void await(String what, BooleanSupplier c) {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what + " within 20 s");
            Thread.onSpinWait();
        }
    }

    long gpuWord(long dptr) {
        byte[] b = new byte[8];
        m.rm.cuMemcpyDtoH(m.proc, b, 0, dptr, 8);
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    @Test
    void aPeerInvalidationUnderAConfiguredWindowFaultsTheNextAccessAndNoDmaFollows() throws Exception {
        up(false);
        IbvPd pd = ctx.allocPd();
        long dptr = m.rm.cuMemAlloc(m.proc, 64 << 10);
        IbvMr mr = pd.regMr(dptr, 64 << 10, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ);
        assertTrue(mr.isPeer(), "nv_mem claimed the cudaMalloc range");
        FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR);
        try {
            // the user's own channel on the process's OBJECT_CHANGE (flexio's error fd has another)
            Mlx5dv.DevxEventChannel ch = Mlx5dv.devxCreateEventChannel(ctx);
            Mlx5dv.devxSubscribeDevxEvent(ch, p.process, new int[] {Eq.EVENT_OBJECT_CHANGE}, 0x3a);
            FlexioWindow w = FlexioWindow.create(p, Mlx5dv.initObjPd(pd));
            long arg = spinArg(p, w.id(), mr.lkey(), dptr + 4096);
            FlexioEventHandler h = FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(TestApps.SPIN_WINDOW, arg));
            h.run();
            assertEquals(0, p.call(TestApps.ACTIVATE, (long) h.id()));
            await("the writer counted through the window", () -> p.call(TestApps.READ, arg + 24) >= 10);
            assertTrue(gpuWord(dptr + 4096) >= 10, "its stores are in video memory, through the mkey, the IOMMU and BAR1");

            long faults = m.iommu.audit().faults();
            long umrs = m.bf3.umrsExecuted();
            m.rm.cuMemFree(m.proc, dptr); // free callback → IB invalidate → mlx5 revokes the mkey → returns; the RM frees
            long barAtReturn = m.iommu.barBytes();
            assertTrue(mr.invalidated(), "the free callback invalidated the MR");
            assertTrue(m.bf3.umrsExecuted() > umrs, "mlx5 revoked the mkey by UMR before the callback returned");
            assertEquals(0, m.rm.usedSlots(), "the RM unmapped BAR1 after the callback");

            await("the writer's next access faulted", () -> p.errStatusGet() == FlexioStatus.ERR_FATAL_ERROR);
            assertEquals(ProcessStatus.WINDOW_FAULT, p.processStatus(), p.crashData());
            assertEquals(barAtReturn, m.iommu.barBytes(), "no window byte crossed BAR1 after the invalidation returned");
            assertEquals(faults, m.iommu.audit().faults(), "refused at the mkey, before the IOMMU");
            Mlx5dv.DevxEvent e = Mlx5dv.devxGetEvent(ch, Duration.ofSeconds(10));
            assertEquals(new Mlx5dv.DevxEvent(0x3a, Eq.EVENT_OBJECT_CHANGE, DpaObj.OBJ_DPA_PROCESS, p.id()), e,
                    "the process error through the DevX event channel, with the process's object id");
            assertTrue(p.errHandlerFdReadable(Duration.ofSeconds(1)), "flexio's error fd too");
            // what dpa:crash shows: the fault, named, at the handler's line
            String crash = m.bf3.dpaCrashes().stream().filter(l -> l.contains("process " + p.id() + " ")).findFirst().orElse("none: " + m.bf3.dpaCrashes());
            assertTrue(crash.contains("RpcProgs.spinWindowHandler") && crash.contains("revoked"), crash);
            Mlx5dv.devxDestroyEventChannel(ch);
        } finally {
            p.destroy();
            mr.dereg();
            pd.dealloc();
        }
    }

    /**
     * The DevX path instead of the verbs MR: a host mkey over GPU memory ({@code FlexioMkey.hostMkeyCreate},
     * a DevX umem and CREATE_MKEY) with the invalidating nv_mem is refused: a DevX umem takes no peer
     * client that needs invalidation, so the range fails with the pin's EFAULT (as MLNX_OFED's
     * {@code devx_umem_get}); nothing is left of the attempt.
     */
    @Test
    void aDevxHostMkeyOverGpuMemoryIsRefusedWithTheInvalidatingClient() {
        up(false);
        long dptr = m.rm.cuMemAlloc(m.proc, 64 << 10);
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR)) {
            FlexioException e = org.junit.jupiter.api.Assertions.assertThrows(FlexioException.class,
                    () -> FlexioMkey.hostMkeyCreate(p, dptr, 4096));
            assertTrue(String.valueOf(e.getMessage()).contains("EFAULT") || String.valueOf(e.getCause()).contains("EFAULT"), e.toString());
            assertEquals(0, m.nv.inUse(), "nothing of nv_mem kept");
        }
        m.rm.cuMemFree(m.proc, dptr);
    }

    /**
     * With the persistent nv_mem a DevX umem over GPU memory backs a host mkey: a window writes
     * through it into video memory ({@code flexio_dev_window_copy_to_host}); a {@code cudaFree} has no
     * callback, so the pages stay the umem's and the window still reaches them until the mkey and its
     * umem are destroyed (the persistent API's contract); then the RM frees them.
     */
    @Test
    void aDevxHostMkeyOverGpuMemoryWorksWithThePersistentClient() {
        up(true);
        long dptr = m.rm.cuMemAlloc(m.proc, 64 << 10);
        try (FlexioProcess p = FlexioProcess.create(ctx, TestApps.rpcApp(), ATTR)) {
            FlexioMkey mkey = FlexioMkey.hostMkeyCreate(p, dptr, 8192);
            assertEquals(1, m.nv.inUse(), "nv_mem supplies the DevX umem");
            FlexioWindow w = FlexioWindow.create(p, p.pdn());
            long src = p.copyFromHost(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 0x1122334455667788L).array());
            long bar = m.iommu.barBytes();
            assertEquals(0, p.call(TestApps.TO_HOST, (long) w.id(), (long) mkey.id(), dptr + 64, src, 8L));
            assertEquals(0x1122334455667788L, gpuWord(dptr + 64), "the window's bytes are in video memory");
            assertEquals(8, m.iommu.barBytes() - bar, "and crossed BAR1");
            m.rm.cuMemFree(m.proc, dptr);
            assertTrue(m.rm.usedPages() > 0, "the persistent registration keeps the video memory");
            assertEquals(0, p.call(TestApps.TO_HOST, (long) w.id(), (long) mkey.id(), dptr + 128, src, 8L), "still reachable until the dereg");
            mkey.destroy();
            assertEquals(0, m.nv.inUse(), "the umem's dereg put the pages");
            assertEquals(0, m.rm.usedPages(), "and the RM freed them");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
        }
    }
}
