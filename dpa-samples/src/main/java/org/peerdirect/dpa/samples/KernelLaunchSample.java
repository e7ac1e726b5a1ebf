package org.peerdirect.dpa.samples;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
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
 * <p>Where the model differs (README "DPA samples"): the context is stopped before it is destroyed
 * (this doca-dpa answers IN_USE to destroying a started context); the device log goes through
 * {@code doca_dpa_log_file_set_path} to a file of the sample's, printed when the context stops (a
 * simulated process has no standard output of its own); the update thread is joined, not
 * detached, so it never outlives its event; the completion wait is bounded (TIME_OUT, never a hang);
 * {@code hello_world} takes one {@code long} (dpacc's kernels do), launched with 0.
 */
final class KernelLaunchSample {

    static final String MAIN = "dpa_kernel_launch_main.c";
    static final String SAMPLE = "dpa_kernel_launch_sample.c";
    static final String COMMON = "dpa_common.c";
    /** The sample's {@code sleep(5)} before the host thread sets the wait event, in milliseconds. */
    static final long DEFAULT_DELAY_MS = 5000;
    /** {@code SYNC_EVENT_MASK_FFS}. */
    static final long SYNC_EVENT_MASK_FFS = -1L;
    /** How long the host waits for the completion event beyond the delay before answering TIME_OUT. */
    static final Duration COMPLETION_BOUND = Duration.ofSeconds(60);

    /** {@code struct dpa_resources} as far as this sample uses it (no extended device, no affinities). */
    private static final class Resources {
        DocaDev pfDocaDevice;
        DocaDpa pfDpaCtx;
        Path log;
    }

    private final DocaLog log;
    private final long delayMs;
    /** The first failure's own message (DOCA prints only the error's description): the command's error names it. */
    private final List<String> causes = java.util.Collections.synchronizedList(new ArrayList<>());

    private KernelLaunchSample(DocaLog log, long delayMs) {
        this.log = log;
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
        boolean ok = s.main(proc, devices, pciAddrOf, pfDevice);
        if (!ok) {
            throw new IllegalStateException(String.join("; ", s.causes));
        }
    }

    private boolean main(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice) {
        log.info(MAIN, 68, "main", "Starting the sample");
        Resources r = new Resources();
        boolean ok = false;
        DocaError result = allocateDpaResources(proc, devices, pciAddrOf, pfDevice, r);
        if (result != DocaError.DOCA_SUCCESS) {
            log.err(MAIN, 90, "main", "Failed to Allocate DPA Resources", result);
        } else {
            result = kernelLaunch(r);
            if (result != DocaError.DOCA_SUCCESS) {
                log.err(MAIN, 96, "main", "kernel_launch() encountered an error", result);
            } else {
                ok = true;
            }
            result = destroyDpaResources(r);
            if (result != DocaError.DOCA_SUCCESS) {
                log.err(MAIN, 105, "main", "Failed to destroy DOCA DPA resources", result);
                ok = false;
            }
        }
        log.info(MAIN, ok ? 112 : 114, "main", ok ? "Sample finished successfully" : "Sample finished with errors");
        return ok;
    }

    private DocaError failed(DocaException e) {
        causes.add(e.getMessage());
        return e.error();
    }

    // ------------------------------------------------------------------ dpa_common.c

    /** {@code open_dpa_device}: the first PF with a DPA (or the one named); no representors here, so no extended device. */
    private DocaError openDpaDevice(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice,
            Resources r) {
        List<DocaDevinfo> devList = DocaDevinfo.createList(proc, devices, pciAddrOf);
        try {
            for (DocaDevinfo info : devList) {
                if (!DocaDpa.capIsSupported(info)) {
                    continue;
                }
                if (pfDevice == null || pfDevice.equals(info.getIbdevName())) {
                    try {
                        r.pfDocaDevice = DocaDev.open(info);
                    } catch (DocaException e) {
                        log.err(COMMON, 308, "open_dpa_device", "Failed to open DOCA device " + info.getIbdevName(), e.error());
                        return failed(e);
                    }
                    return DocaError.DOCA_SUCCESS;
                }
            }
            log.err(COMMON, 320, "open_dpa_device", "Couldn't find PF DOCA device");
            causes.add("no device with a DPA" + (pfDevice == null ? "" : " named " + pfDevice) + " (only a BlueField-3 has one)");
            return DocaError.DOCA_ERROR_NOT_FOUND;
        } finally {
            DocaDevinfo.destroyList(devList);
        }
    }

    /** {@code allocate_dpa_resources}: device, context, app, start; the device log to the sample's file. */
    private DocaError allocateDpaResources(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf,
            String pfDevice, Resources r) {
        try {
            r.log = Files.createTempFile("dpa_sample_kernel_launch", ".log"); // first: nothing to undo if it fails
        } catch (IOException e) {
            throw new UncheckedIOException("dpa:sample kernel_launch: a file for the device log", e);
        }
        DocaError result = openDpaDevice(proc, devices, pciAddrOf, pfDevice, r);
        if (result != DocaError.DOCA_SUCCESS) {
            log.err(COMMON, 751, "allocate_dpa_resources", "Function open_doca_device() failed");
            deleteLog(r);
            return result;
        }
        try {
            r.pfDpaCtx = DocaDpa.create(r.pfDocaDevice);
        } catch (DocaException e) {
            log.err(COMMON, 757, "allocate_dpa_resources", "Failed to create DOCA DPA context", e.error());
            r.pfDocaDevice.close();
            deleteLog(r);
            return failed(e);
        }
        int line = 763;
        try {
            r.pfDpaCtx.setApp(KernelLaunchDevStubs.APP);
            r.pfDpaCtx.logFileSetPath(r.log.toString()); // [model] the device log's lines: see the class comment
            line = 769;
            r.pfDpaCtx.start();
            return DocaError.DOCA_SUCCESS;
        } catch (DocaException e) {
            log.err(COMMON, line, "allocate_dpa_resources", line == 763 ? "Failed to set DOCA DPA app" : "Failed to start DOCA DPA context",
                    e.error());
            r.pfDpaCtx.destroy();
            r.pfDocaDevice.close();
            deleteLog(r);
            return failed(e);
        }
    }

    /** {@code destroy_dpa_resources}: the context (stopped first [model]), then the device; the device log printed when it stopped. */
    private DocaError destroyDpaResources(Resources r) {
        DocaError result = DocaError.DOCA_SUCCESS;
        try {
            r.pfDpaCtx.stop(); // prints what the device logged: the stream is drained when it goes
            printDeviceLog(r);
            r.pfDpaCtx.destroy();
        } catch (DocaException e) {
            log.err(COMMON, 867, "destroy_dpa_resources", "Function doca_dpa_destroy() failed", e.error());
            result = failed(e);
        }
        try {
            r.pfDocaDevice.close();
        } catch (DocaException e) {
            log.err(COMMON, 881, "destroy_dpa_resources", "Failed to close DOCA device", e.error());
            result = result == DocaError.DOCA_SUCCESS ? failed(e) : result;
        }
        return result;
    }

    private void printDeviceLog(Resources r) {
        try {
            for (String l : Files.readAllLines(r.log)) {
                log.raw(l);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("dpa:sample kernel_launch: the device log's file", e);
        } finally {
            deleteLog(r);
        }
    }

    private static void deleteLog(Resources r) {
        try {
            Files.deleteIfExists(r.log);
        } catch (IOException e) {
            // a temporary file left behind is no failure of the sample
        }
    }

    /** {@code create_doca_dpa_wait_sync_event}: CPU publisher, DPA subscriber (its counter in DPA memory). */
    private DocaSyncEvent createWaitSyncEvent(Resources r) {
        DocaSyncEvent ev = DocaSyncEvent.create();
        try {
            ev.addPublisherLocationCpu(r.pfDocaDevice);
            ev.addSubscriberLocationDpa(r.pfDpaCtx);
            ev.start();
            return ev;
        } catch (DocaException e) {
            ev.destroy();
            throw e;
        }
    }

    /** {@code create_doca_dpa_completion_sync_event}: DPA publisher, CPU subscriber. */
    private DocaSyncEvent createCompletionSyncEvent(Resources r) {
        DocaSyncEvent ev = DocaSyncEvent.create();
        try {
            ev.addPublisherLocationDpa(r.pfDpaCtx);
            ev.addSubscriberLocationCpu(r.pfDocaDevice);
            ev.start();
            return ev;
        } catch (DocaException e) {
            ev.destroy();
            throw e;
        }
    }

    // ------------------------------------------------------------------ dpa_kernel_launch_sample.c

    /** {@code kernel_launch}: the launch gated by the wait event, the host thread that sets it, the wait for completion. */
    private DocaError kernelLaunch(Resources r) {
        long waitThresh = 4;
        long compEventVal = 10;
        int numDpaThreads = 1;
        DocaSyncEvent waitEvent;
        try {
            waitEvent = createWaitSyncEvent(r);
        } catch (DocaException e) {
            log.err(SAMPLE, 79, "kernel_launch", "Failed to create DOCA sync event for DPA kernel wait", e.error());
            return failed(e);
        }
        DocaError result = DocaError.DOCA_SUCCESS;
        DocaSyncEvent compEvent = null;
        Thread tid = null;
        try {
            compEvent = createCompletionSyncEvent(r);
        } catch (DocaException e) {
            log.err(SAMPLE, 88, "kernel_launch", "Failed to create DOCA sync event for DPA kernel completion", e.error());
            result = failed(e);
        }
        if (compEvent != null) {
            try {
                r.pfDpaCtx.kernelLaunchUpdateSet(waitEvent, waitThresh, compEvent, compEventVal, numDpaThreads, KernelLaunchDevStubs.HELLO_WORLD, 0L);
                tid = Thread.ofPlatform().daemon().name("dpa_sample_kernel_launch-wait_event_update").start(() -> waitEventUpdateThread(waitEvent));
                compEvent.waitGt(compEventVal - 1, SYNC_EVENT_MASK_FFS, COMPLETION_BOUND.plusMillis(delayMs));
            } catch (DocaException e) {
                boolean launched = tid != null;
                log.err(SAMPLE, launched ? 121 : 101, "kernel_launch",
                        launched ? "Failed to wait for host completion event" : "Failed to launch hello_world kernel", e.error());
                result = failed(e);
            }
            join(tid);
            pause(delayMs * 2 / 5); // the sample's sleep(2) before the events go
            try {
                compEvent.destroy();
            } catch (DocaException e) {
                log.err(SAMPLE, 128, "kernel_launch", "Failed to destroy host completion event", e.error());
                result = result == DocaError.DOCA_SUCCESS ? failed(e) : result;
            }
        }
        try {
            waitEvent.destroy();
        } catch (DocaException e) {
            log.err(SAMPLE, 134, "kernel_launch", "Failed to destroy host wait event", e.error());
            result = result == DocaError.DOCA_SUCCESS ? failed(e) : result;
        }
        return result;
    }

    /** {@code wait_event_update_thread}: the sample's delay, then the wait event set to 5. */
    private void waitEventUpdateThread(DocaSyncEvent event) {
        pause(delayMs);
        try {
            event.updateSet(5);
        } catch (DocaException e) {
            log.err(SAMPLE, 54, "wait_event_update_thread", "Failed to update DOCA sync event", e.error());
            causes.add(e.getMessage());
        }
    }

    /** The sample's {@code sleep}: a program's delay (what it shows: the kernel waits for its event), no synchronisation. */
    private static void pause(long ms) {
        long end = System.nanoTime() + ms * 1_000_000;
        for (long left; (left = end - System.nanoTime()) > 0;) {
            LockSupport.parkNanos(left);
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
