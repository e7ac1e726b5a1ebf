package org.peerdirect.dpa.samples;

import java.time.Duration;
import java.util.function.Function;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.KernelLaunchDevStubs;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * {@code dpa:sample kernel_launch}: DOCA's {@code dpa_kernel_launch} sample (doca-samples 3.3,
 * {@code samples/doca_dpa/dpa_kernel_launch}: {@code dpa_kernel_launch_main.c},
 * {@code host/dpa_kernel_launch_sample.c} and the parts of {@code dpa_common.c} it calls; DPA_MODEL.md
 * §4 scenario 5) in its call order: open the first device with a DPA, create, set_app and start the
 * DPA context; a wait event (CPU publisher, DPA subscriber) and a completion event (DPA publisher,
 * CPU subscriber); launch {@code hello_world} with one thread, wait threshold 4, completion value
 * 10; a host thread sets the wait event to 5 after a delay; the host waits until the completion
 * event passes 9, then destroys the events, the context and the device. The printout is the
 * sample's: its {@code DOCA_LOG_*} lines with their C file and line ({@link DocaLog}) and the
 * kernel's {@code DOCA_DPA_DEV_LOG_INFO} line.
 *
 * <p>Where the model differs (README "DPA samples"): {@link DpaCommon}'s (context stopped before
 * it is destroyed, device log through a file printed when the context stops); the update thread is joined, not
 * detached, so it never outlives its event; the completion wait is bounded (TIME_OUT, never a hang);
 * {@code hello_world} takes one {@code long} (dpacc's kernels do), launched with 0.
 */
final class KernelLaunchSample {

    static final String MAIN = "dpa_kernel_launch_main.c";
    static final String SAMPLE = "dpa_kernel_launch_sample.c";
    /** The sample's {@code sleep(5)} before the host thread sets the wait event, in milliseconds. */
    static final long DEFAULT_DELAY_MS = 5000;
    /** How long the host waits for the completion event beyond the delay before answering TIME_OUT. */
    static final Duration COMPLETION_BOUND = Duration.ofSeconds(60);

    private final DocaLog log;
    private final DpaCommon common;
    private final long delayMs;

    private KernelLaunchSample(DocaLog log, long delayMs) {
        this.log = log;
        this.common = new DpaCommon(log, "kernel_launch");
        this.delayMs = delayMs;
    }

    /**
     * {@code main}: runs the sample in {@code proc} on the first device with a DPA, or on
     * {@code pfDevice} when not null ({@code -pf_dev}); prints into {@code out}.
     *
     * @throws IllegalStateException when the sample finished with errors, naming the first failure
     */
    static void run(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice, long delayMs,
            Out out) {
        KernelLaunchSample s = new KernelLaunchSample(new DocaLog(out, proc.pid()), delayMs);
        s.common.main(MAIN, new int[] {68, 90, 96, 105, 112, 114}, "kernel_launch", proc, devices, pciAddrOf, pfDevice,
                KernelLaunchDevStubs.APP, s::kernelLaunch);
    }

    // ------------------------------------------------------------------ dpa_kernel_launch_sample.c

    /** {@code kernel_launch}: the launch gated by the wait event, the host thread that sets it, the wait for completion. */
    private DocaError kernelLaunch(DpaCommon.Resources r) {
        long waitThresh = 4;
        long compEventVal = 10;
        int numDpaThreads = 1;
        DocaSyncEvent waitEvent;
        try {
            waitEvent = DpaCommon.createWaitSyncEvent(r);
        } catch (DocaException e) {
            log.err(SAMPLE, 79, "kernel_launch", "Failed to create DOCA sync event for DPA kernel wait", e.error());
            return common.failed(e);
        }
        DocaError result = DocaError.DOCA_SUCCESS;
        DocaSyncEvent compEvent = null;
        Thread tid = null;
        try {
            compEvent = DpaCommon.createCompletionSyncEvent(r);
        } catch (DocaException e) {
            log.err(SAMPLE, 88, "kernel_launch", "Failed to create DOCA sync event for DPA kernel completion", e.error());
            result = common.failed(e);
        }
        if (compEvent != null) {
            try {
                r.pfDpaCtx.kernelLaunchUpdateSet(waitEvent, waitThresh, compEvent, compEventVal, numDpaThreads, KernelLaunchDevStubs.HELLO_WORLD, 0L);
                tid = Thread.ofPlatform().daemon().name("dpa_sample_kernel_launch-wait_event_update").start(() -> waitEventUpdateThread(waitEvent));
                compEvent.waitGt(compEventVal - 1, DpaCommon.SYNC_EVENT_MASK_FFS, COMPLETION_BOUND.plusMillis(delayMs));
            } catch (DocaException e) {
                boolean launched = tid != null;
                log.err(SAMPLE, launched ? 121 : 101, "kernel_launch",
                        launched ? "Failed to wait for host completion event" : "Failed to launch hello_world kernel", e.error());
                result = common.failed(e);
            }
            join(tid);
            DpaCommon.pause(delayMs * 2 / 5); // the sample's sleep(2) before the events go
            try {
                compEvent.destroy();
            } catch (DocaException e) {
                log.err(SAMPLE, 128, "kernel_launch", "Failed to destroy host completion event", e.error());
                result = result == DocaError.DOCA_SUCCESS ? common.failed(e) : result;
            }
        }
        try {
            waitEvent.destroy();
        } catch (DocaException e) {
            log.err(SAMPLE, 134, "kernel_launch", "Failed to destroy host wait event", e.error());
            result = result == DocaError.DOCA_SUCCESS ? common.failed(e) : result;
        }
        return result;
    }

    /** {@code wait_event_update_thread}: the sample's delay, then the wait event set to 5. */
    private void waitEventUpdateThread(DocaSyncEvent event) {
        DpaCommon.pause(delayMs);
        try {
            event.updateSet(5);
        } catch (DocaException e) {
            log.err(SAMPLE, 54, "wait_event_update_thread", "Failed to update DOCA sync event", e.error());
            common.causes.add(e.getMessage());
        }
    }

    private static void join(Thread t) {
        if (t == null) {
            return;
        }
        try {
            t.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
