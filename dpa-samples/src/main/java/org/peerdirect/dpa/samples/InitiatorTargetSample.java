package org.peerdirect.dpa.samples;

import static org.peerdirect.dpa.samples.dev.InitiatorTargetDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.function.Function;

import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.InitiatorTargetDevStubs;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * {@code dpa:sample initiator_target}: DOCA's {@code dpa_initiator_target} sample (doca-samples
 * 3.3, {@code samples/doca_dpa/dpa_initiator_target}: {@code dpa_initiator_target_main.c},
 * {@code host/dpa_initiator_target_sample.c}; DPA_MODEL.md §4 scenario 6) in its call order: an
 * initiator DOCA RDMA context (its completion context has no thread, as the C sample's: DOCA's
 * manual polling; its sends are unreported) and a target one on the DPA, joined by two connections; the target's
 * completion context triggers thread 1 ({@code thread1_kernel}), which takes the four receives
 * (values 1..4 with immediates 10..13, alternating connections) and then notifies thread 2
 * ({@code thread2_kernel}) through a notification completion; thread 2 sets the completion sync
 * event to 10 while the host waits for it to pass 9; then everything is destroyed in the sample's
 * order. The printout is the sample's {@code DOCA_LOG_*} lines with their C file and line, then
 * the device's {@code DOCA_DPA_DEV_LOG_*} lines ({@link DpaCommon}: printed when the context stops).
 *
 * <p>Where the model differs (README "DPA samples"), besides {@link DpaCommon}'s: the sent values live
 * in a map of DPA memory, four words, not one host variable rewritten after each post (a host
 * map has no DPA handle here; and rewriting the buffer right after the RPC races the NIC's read of
 * it); the RPCs' device log lines print nothing (an RPC has no DOCA thread); the wait is bounded.
 */
final class InitiatorTargetSample {

    static final String MAIN = "dpa_initiator_target_main.c";
    static final String SAMPLE = "dpa_initiator_target_sample.c";
    static final int PERMISSIONS = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_ATOMIC;
    /** How long the host waits for thread 2's event before answering TIME_OUT. */
    static final Duration COMPLETION_BOUND = Duration.ofSeconds(60);

    private final DocaLog log;
    private final DpaCommon common;
    private final SampleSteps steps;

    private InitiatorTargetSample(DocaLog log) {
        this.log = log;
        this.common = new DpaCommon(log, "initiator_target");
        this.steps = new SampleSteps(log, common, SAMPLE, "dpa_initiator_target");
    }

    /**
     * {@code main}: runs the sample in {@code proc} on the first device with a DPA, or on
     * {@code pfDevice} when not null; prints into {@code out}.
     *
     * @throws IllegalStateException when the sample finished with errors, naming the first failure
     */
    static void run(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice, Out out) {
        InitiatorTargetSample s = new InitiatorTargetSample(new DocaLog(out, proc.pid()));
        s.common.main(MAIN, new int[] {64, 86, 92, 101, 110, 112}, "dpa_initiator_target", proc, devices, pciAddrOf, pfDevice,
                InitiatorTargetDevStubs.APP, s::dpaInitiatorTarget);
    }

    // ------------------------------------------------------------------ dpa_initiator_target_sample.c

    /** {@code rdma_obj_create}: DOCA RDMA on the DPA with two connections exported ({@code dpa_rdma_obj_init}/{@code _start}). */
    private DocaRdma rdmaObjCreate(DocaDpa dpa, DpaCommon.Resources r, DocaDpaCompletion comp, boolean initiator, int errLine) {
        int destroyLine = initiator ? 513 : 485;
        log.info(SAMPLE, 59, "rdma_obj_create", "Create DOCA RDMA");
        DocaRdma rdma = steps.call(errLine, "rdma_obj_create", () -> DocaRdma.create(r.rdmaDocaDevice()));
        steps.undo(destroyLine, "rdma_obj_destroy", () -> {
            log.info(SAMPLE, 108, "rdma_obj_destroy", "Destroy " + (initiator ? "Initiator" : "Target") + " DOCA RDMA");
            rdma.stop();
            rdma.destroy();
        });
        steps.run(errLine, "rdma_obj_create", () -> {
            rdma.setPermissions(PERMISSIONS);
            rdma.setDatapathOnDpa(dpa);
            rdma.setRecvQueueSize(EXPECTED_NUM_RECEIVES);
            rdma.setMaxNumConnections(2);
            if (comp != null) {
                rdma.dpaCompletionAttach(comp);
            }
        });
        log.info(SAMPLE, 77, "rdma_obj_create", "Start DOCA RDMA");
        steps.run(errLine, "rdma_obj_create", rdma::start);
        return rdma;
    }

    /** {@code rdma_objs_connect}: initiator's connection n to the target's connection n, and back, for n = 1, 2. */
    private void rdmaObjsConnect(DocaRdma initiator, DocaRdma.Export[] ie, DocaRdma target, DocaRdma.Export[] te) {
        int[] lines = {131, 141, 151, 161};
        for (int n = 0; n < 2; n++) {
            int k = n;
            log.info(SAMPLE, lines[2 * n], "rdma_objs_connect", "Connect Initiator DOCA RDMA connection #" + (n + 1)
                    + " to Target DOCA RDMA connection #" + (n + 1));
            steps.run(257, "rdma_objs_connect", () -> initiator.connect(te[k].connectionDetails(), ie[k].connection()));
            log.info(SAMPLE, lines[2 * n + 1], "rdma_objs_connect", "Connect Target DOCA RDMA connection #" + (n + 1)
                    + " to Initiator DOCA RDMA connection #" + (n + 1));
            steps.run(257, "rdma_objs_connect", () -> target.connect(ie[k].connectionDetails(), te[k].connection()));
        }
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    /** {@code dpa_initiator_target}: the sample's logic, then its teardown in the C function's order. */
    private DocaError dpaInitiatorTarget(DpaCommon.Resources r) {
        return steps.finish(() -> logic(r), () -> log.info(SAMPLE, 430, "dpa_initiator_target", "Tear down"));
    }

    /** What the first half of the sample made for the second: the RDMA contexts, thread 1's argument, the target's completion context. */
    private record Sides(DocaRdma initiator, DocaRdma.Export[] ie, DocaRdma target, long threadArg, DocaDpaCompletion targetComp) {
    }

    /** The sample's first half: both DOCA RDMA contexts, thread 1 and its completion context, the connections, thread 1 run. */
    private Sides rdmaSides(DpaCommon.Resources r) {
        DocaDpa dpa = r.rdmaDpaCtx();
        log.info(SAMPLE, 205, "dpa_initiator_target", "Create Initiator DOCA DPA Completion");
        // dpa_completion_obj_init with no thread: set_thread skipped, started, polled by nobody (the sends are unreported)
        DocaDpaCompletion initiatorComp = steps.call(210, "dpa_completion_obj_init", () -> DocaDpaCompletion.create(dpa, 4));
        steps.undo(520, "dpa_completion_obj_destroy", initiatorComp::destroy);
        steps.run(210, "dpa_completion_obj_init", initiatorComp::start);
        log.info(SAMPLE, 214, "dpa_initiator_target", "Initialize Initiator DOCA RDMA");
        DocaRdma initiator = rdmaObjCreate(dpa, r, initiatorComp, true, 217);
        DocaRdma.Export[] ie = {steps.call(217, "rdma_obj_create", initiator::export), steps.call(217, "rdma_obj_create", initiator::export)};

        log.info(SAMPLE, 221, "dpa_initiator_target", "Allocate Target DPA thread #1 device argument");
        long threadArg = steps.memAlloc(dpa, T1_SIZE, 224, 506);
        steps.run(224, "doca_dpa_memset", () -> dpa.memset(threadArg, 0, T1_SIZE)); // [model] the C file's zeroed globals live here
        log.info(SAMPLE, 228, "dpa_initiator_target", "Create Target DOCA DPA Thread #1");
        DocaDpaThread thread1 = steps.threadObjInit(dpa, InitiatorTargetDevStubs.THREAD1_KERNEL, threadArg, 0, 234, 499);
        log.info(SAMPLE, 238, "dpa_initiator_target", "Create Target DOCA DPA Completion");
        DocaDpaCompletion targetComp = steps.call(244, "dpa_completion_obj_init", () -> DocaDpaCompletion.create(dpa, 4));
        steps.undo(492, "dpa_completion_obj_destroy", targetComp::destroy);
        steps.run(244, "dpa_completion_obj_init", () -> {
            targetComp.setThread(thread1);
            targetComp.start();
        });
        log.info(SAMPLE, 248, "dpa_initiator_target", "Initialize Target DOCA RDMA");
        DocaRdma target = rdmaObjCreate(dpa, r, targetComp, false, 251);
        DocaRdma.Export[] te = {steps.call(251, "rdma_obj_create", target::export), steps.call(251, "rdma_obj_create", target::export)};
        rdmaObjsConnect(initiator, ie, target, te);
        log.info(SAMPLE, 261, "dpa_initiator_target", "Run Target DOCA DPA Thread #1");
        steps.run(264, "doca_dpa_thread_run", thread1::run);
        return new Sides(initiator, ie, target, threadArg, targetComp);
    }

    private void logic(DpaCommon.Resources r) {
        DocaDpa dpa = r.rdmaDpaCtx();
        Sides sides = rdmaSides(r);
        DocaRdma initiator = sides.initiator();
        DocaRdma.Export[] ie = sides.ie();
        DocaRdma target = sides.target();
        long threadArg = sides.threadArg();
        DocaDpaCompletion targetComp = sides.targetComp();

        log.info(SAMPLE, 268, "dpa_initiator_target", "Allocate Target DPA thread #2 device argument");
        long thread2Arg = steps.memAlloc(dpa, T2_SIZE, 271, 478);
        log.info(SAMPLE, 275, "dpa_initiator_target", "Create Target DOCA DPA Thread #2");
        DocaDpaThread thread2 = steps.threadObjInit(dpa, InitiatorTargetDevStubs.THREAD2_KERNEL, thread2Arg, 0, 281, 471);
        log.info(SAMPLE, 285, "dpa_initiator_target", "Create Target DOCA DPA Notification Completion");
        DocaDpaNotificationCompletion notification = steps.call(290, "dpa_notification_completion_obj_init",
                () -> DocaDpaNotificationCompletion.create(dpa, thread2));
        steps.undo(463, "dpa_notification_completion_obj_destroy", notification::destroy);
        long notificationHandle = steps.call(290, "dpa_notification_completion_obj_init", () -> {
            notification.start();
            return notification.getDpaHandle();
        });
        log.info(SAMPLE, 295, "dpa_initiator_target", "Run Target DOCA DPA Thread #2");
        steps.run(298, "doca_dpa_thread_run", thread2::run);

        log.info(SAMPLE, 302, "dpa_initiator_target", "Create completion DOCA sync event");
        long waitSyncEvThreshold = 9;
        DocaSyncEvent compEvent = steps.call(308, "create_doca_dpa_completion_sync_event", () -> DpaCommon.createCompletionSyncEvent(r));
        steps.undo(456, "doca_sync_event_destroy", compEvent::destroy);
        long seHandle = steps.call(308, "create_doca_dpa_completion_sync_event", () -> compEvent.getDpaHandle(r.pfDpaCtx));
        log.info(SAMPLE, 313, "dpa_initiator_target", "Update Target DPA thread #2 device argument");
        steps.run(321, "doca_dpa_h2d_memcpy", () -> dpa.h2dMemcpy(thread2Arg, le(seHandle, waitSyncEvThreshold + 1)));

        log.info(SAMPLE, 325, "dpa_initiator_target", "Create Target DOCA MMAP on DPA for Target DOCA RDMA received buffer");
        long receivedBuf = steps.memAlloc(dpa, 8, 328, 449);
        steps.run(334, "doca_dpa_memset", () -> dpa.memset(receivedBuf, 0, 8));
        int dpaMmapHandle = steps.dpaMmap(dpa, r.rdmaDocaDevice(), receivedBuf, 8, PERMISSIONS, 347, 442);
        log.info(SAMPLE, 351, "dpa_initiator_target", "Update Target DPA thread #1 device argument");
        steps.run(364, "doca_dpa_h2d_memcpy", () -> dpa.h2dMemcpy(threadArg, le(0, notificationHandle, targetComp.getDpaHandle(),
                target.getDpaHandle(), receivedBuf, dpaMmapHandle, 8)));

        log.info(SAMPLE, 368, "dpa_initiator_target", "Create Initiator DOCA MMAP for send buffer on Host");
        int testIter = EXPECTED_NUM_RECEIVES;
        long sendBuf = steps.memAlloc(dpa, 8L * testIter, 378, 435); // [model] DPA memory, a word per send: see the class comment
        steps.run(378, "doca_mmap_obj_init", () -> dpa.h2dMemcpy(sendBuf, le(1, 2, 3, 4)));
        int sendMmapHandle = steps.dpaMmap(dpa, r.rdmaDocaDevice(), sendBuf, 8L * testIter, PERMISSIONS, 378, 435);

        log.info(SAMPLE, 382, "dpa_initiator_target", "Trigger an RPC to prepare Target DPA receive memory");
        steps.call(392, "doca_dpa_rpc", () -> dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_RECEIVE_RPC, 0L, target.getDpaHandle(), receivedBuf,
                dpaMmapHandle, 8L));
        long sendVal = 1;
        int immVal = 10;
        for (int i = 0; i < testIter; i++) {
            int conn = (i % 2 == 0 ? ie[0] : ie[1]).connection().getId();
            log.info(SAMPLE, 397, "dpa_initiator_target", "Trigger an RPC to post send on Initiator DOCA RDMA connection #" + conn
                    + " with buffer " + sendVal + " and immediate value " + immVal);
            long src = sendBuf + 8L * i;
            int imm = immVal++;
            steps.call(414, "doca_dpa_rpc", () -> dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), conn, src,
                    sendMmapHandle, 8L, imm));
            sendVal++; // "update mmap value": the next word holds it already
        }
        log.info(SAMPLE, 422, "dpa_initiator_target",
                "Waiting for Target Thread #2 to set completion Sync Event value to be greater than " + waitSyncEvThreshold);
        steps.run(426, "doca_sync_event_wait_gt", () -> compEvent.waitGt(waitSyncEvThreshold, DpaCommon.SYNC_EVENT_MASK_FFS, COMPLETION_BOUND));
    }
}
