package org.peerdirect.dpa.samples;

import static org.peerdirect.dpa.samples.dev.PingPongDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.function.Function;

import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.PingPongDevStubs;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * {@code dpa:sample ping_pong}: DOCA's {@code dpa_ping_pong} sample (doca-samples 3.3,
 * {@code samples/doca_dpa/dpa_ping_pong}: {@code dpa_ping_pong_main.c},
 * {@code host/dpa_ping_pong_sample.c}; DPA_MODEL.md §4 scenario 7) in its call order: per side
 * (ping, pong) a thread argument, local storage and received-values array, a thread with its TLS,
 * a completion context; the two DOCA RDMA contexts on the DPA connected; both threads run; a
 * completion sync event per side; receive and send buffers mapped; the arguments copied; the first
 * iteration by RPC; then the host waits until both events pass 9 and destroys everything in the C
 * function's order. The host logs nothing but {@code main}'s two lines; the device's
 * {@code "Ping --> Pong Iteration #n"} lines (100 per side) come after them, printed when the context stops.
 *
 * <p>Differences (README "DPA samples"), besides {@link DpaCommon}'s: the RPC's {@code "Trigger First Ping --> Pong Iteration"} prints nothing (an RPC has no DOCA
 * thread); the device structs are 8-byte words; the waits are bounded.
 */
final class PingPongSample {

    static final String MAIN = "dpa_ping_pong_main.c";
    static final String SAMPLE = "dpa_ping_pong_sample.c";
    static final int PERMISSIONS = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;
    static final Duration BOUND = Duration.ofSeconds(120);
    static final long WAIT_SYNC_EV_THRESHOLD = 9;

    private final DocaLog log;
    private final DpaCommon common;
    private final SampleSteps steps;

    private PingPongSample(DocaLog log) {
        this.log = log;
        this.common = new DpaCommon(log, "ping_pong");
        this.steps = new SampleSteps(log, common, SAMPLE, "dpa_ping_pong");
    }

    /**
     * {@code main} on the first device with a DPA (or {@code pfDevice}), printing into {@code out}.
     *
     * @throws IllegalStateException when the sample finished with errors, naming the first failure
     */
    static void run(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice, Out out) {
        PingPongSample s = new PingPongSample(new DocaLog(out, proc.pid()));
        s.common.main(MAIN, new int[] {64, 86, 92, 101, 110, 112}, "dpa_ping_pong", proc, devices, pciAddrOf, pfDevice,
                PingPongDevStubs.APP, r -> s.steps.finish(() -> s.dpaPingPong(r), () -> { }));
    }

    /** One side's device memory: its thread argument, local storage and received-values array. */
    private record Mem(long arg, long tls, long values) {
    }

    /** A side's argument, TLS and array; the TLS copied in ({@code struct dpa_ping_pong_tls}). Lines: alloc, memset, tls, array, h2d; frees. */
    private Mem mem(DocaDpa dpa, boolean ping, int[] err, int[] free) {
        long arg = steps.memAlloc(dpa, PP_SIZE, err[0], free[0]);
        steps.run(err[1], "doca_dpa_memset", () -> dpa.memset(arg, 0, PP_SIZE));
        long tls = steps.memAlloc(dpa, TLS_SIZE, err[2], free[1]);
        long values = steps.memAlloc(dpa, 4L * ITERATIONS, err[3], free[2]);
        steps.run(err[3], "doca_dpa_memset", () -> dpa.memset(values, 0, 4L * ITERATIONS)); // [model] the C array is not zeroed; a fresh heap is
        steps.run(err[4], "doca_dpa_h2d_memcpy", () -> dpa.h2dMemcpy(tls, le(values, 0, ping ? 1 : 0, 0, 0))); // no mutant, not free-running
        return new Mem(arg, tls, values);
    }

    /** {@code dpa_completion_obj_init} with the thread, queue size 2. */
    private DocaDpaCompletion completion(DocaDpa dpa, DocaDpaThread t, int errLine, int destroyLine) {
        DocaDpaCompletion c = steps.call(errLine, "dpa_completion_obj_init", () -> DocaDpaCompletion.create(dpa, 2));
        steps.undo(destroyLine, "dpa_completion_obj_destroy", c::destroy);
        steps.run(errLine, "dpa_completion_obj_init", () -> {
            c.setThread(t);
            c.start();
        });
        return c;
    }

    /** {@code dpa_rdma_obj_init} + {@code _start} of one side: receive queue 1, its completion context, one connection exported. */
    private DocaRdma.Export rdma(DpaCommon.Resources r, DocaDpaCompletion comp, DocaRdma[] made) {
        DocaRdma rdma = steps.call(315, "rdma_objs_init", () -> DocaRdma.create(r.rdmaDocaDevice()));
        made[0] = rdma;
        return steps.call(315, "rdma_objs_init", () -> {
            rdma.setPermissions(PERMISSIONS);
            rdma.setDatapathOnDpa(r.rdmaDpaCtx());
            rdma.setRecvQueueSize(1);
            rdma.dpaCompletionAttach(comp);
            rdma.start();
            return rdma.export();
        });
    }

    /** A completion sync event ({@code create_doca_dpa_completion_sync_event}: DPA publisher, CPU subscriber); its DPA handle. */
    private long event(DpaCommon.Resources r, DocaSyncEvent[] made, int errLine, int destroyLine) {
        DocaSyncEvent ev = steps.call(errLine, "create_doca_dpa_completion_sync_event", DocaSyncEvent::create);
        steps.undo(destroyLine, "doca_sync_event_destroy", ev::destroy);
        made[0] = ev;
        return steps.call(errLine, "create_doca_dpa_completion_sync_event", () -> {
            ev.addPublisherLocationDpa(r.pfDpaCtx);
            ev.addSubscriberLocationCpu(r.pfDocaDevice);
            ev.start();
            return ev.getDpaHandle(r.pfDpaCtx);
        });
    }

    /** An 8-byte buffer, zeroed and mapped; {address, DPA handle}. */
    private long[] buffer(DocaDpa dpa, DpaCommon.Resources r, int allocLine, int memsetLine, int mmapLine, int freeLine, int destroyLine) {
        long d = steps.memAlloc(dpa, 8, allocLine, freeLine);
        steps.run(memsetLine, "doca_dpa_memset", () -> dpa.memset(d, 0, 8));
        return new long[] {d, steps.dpaMmap(dpa, r.rdmaDocaDevice(), d, 8, PERMISSIONS, mmapLine, destroyLine)};
    }

    /** {@code dpa_ping_pong}: the sample's logic; the teardown is {@link SampleSteps#finish}'s, in the C function's order. */
    private void dpaPingPong(DpaCommon.Resources r) {
        DocaDpa dpa = r.rdmaDpaCtx();
        Mem ping = mem(dpa, true, new int[] {205, 210, 216, 223, 234}, new int[] {655, 648, 641});
        Mem pong = mem(dpa, false, new int[] {240, 245, 251, 258, 269}, new int[] {634, 627, 620});
        DocaDpaThread pingThread = steps.threadObjInit(dpa, PingPongDevStubs.THREAD_KERNEL, ping.arg(), ping.tls(), 279, 613);
        DocaDpaThread pongThread = steps.threadObjInit(dpa, PingPongDevStubs.THREAD_KERNEL, pong.arg(), pong.tls(), 288, 606);
        DocaDpaCompletion pingComp = completion(dpa, pingThread, 297, 599);
        DocaDpaCompletion pongComp = completion(dpa, pongThread, 305, 592);
        DocaRdma[] pingRdma = new DocaRdma[1];
        DocaRdma[] pongRdma = new DocaRdma[1];
        steps.undo(585, "rdma_objs_destroy", () -> { // rdma_objs_destroy: ping's, then pong's
            for (DocaRdma x : new DocaRdma[] {pingRdma[0], pongRdma[0]}) {
                if (x != null) {
                    x.destroy();
                }
            }
        });
        DocaRdma.Export pingExport = rdma(r, pingComp, pingRdma);
        DocaRdma.Export pongExport = rdma(r, pongComp, pongRdma);
        steps.run(315, "rdma_objs_init", () -> {
            pingRdma[0].connect(pongExport.connectionDetails(), pingExport.connection());
            pongRdma[0].connect(pingExport.connectionDetails(), pongExport.connection());
        });
        steps.run(321, "doca_dpa_thread_run", pingThread::run);
        steps.run(326, "doca_dpa_thread_run", pongThread::run);
        DocaSyncEvent[] pingSe = new DocaSyncEvent[1];
        DocaSyncEvent[] pongSe = new DocaSyncEvent[1];
        long pingSeHandle = event(r, pingSe, 335, 578);
        long pongSeHandle = event(r, pongSe, 344, 571);
        long[] pingRecv = buffer(dpa, r, 351, 357, 370, 564, 557);
        long[] pongRecv = buffer(dpa, r, 376, 382, 395, 550, 543);
        long[] pingSend = buffer(dpa, r, 401, 407, 420, 536, 529);
        long[] pongSend = buffer(dpa, r, 426, 432, 445, 522, 515);
        steps.run(465, "doca_dpa_h2d_memcpy", () -> dpa.h2dMemcpy(ping.arg(), le(pingComp.getDpaHandle(), pingRdma[0].getDpaHandle(), pingRecv[0],
                pingRecv[1], 8, pingSend[0], pingSend[1], 8, pingSeHandle, WAIT_SYNC_EV_THRESHOLD + 1)));
        steps.run(485, "doca_dpa_h2d_memcpy", () -> dpa.h2dMemcpy(pong.arg(), le(pongComp.getDpaHandle(), pongRdma[0].getDpaHandle(), pongRecv[0],
                pongRecv[1], 8, pongSend[0], pongSend[1], 8, pongSeHandle, WAIT_SYNC_EV_THRESHOLD + 1)));
        steps.call(496, "doca_dpa_rpc", () -> dpa.rpc(PingPongDevStubs.TRIGGER_FIRST_ITERATION_RPC, ping.arg(), pong.arg()));
        steps.run(502, "doca_sync_event_wait_gt", () -> pingSe[0].waitGt(WAIT_SYNC_EV_THRESHOLD, DpaCommon.SYNC_EVENT_MASK_FFS, BOUND));
        steps.run(508, "doca_sync_event_wait_gt", () -> pongSe[0].waitGt(WAIT_SYNC_EV_THRESHOLD, DpaCommon.SYNC_EVENT_MASK_FFS, BOUND));
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }
}
