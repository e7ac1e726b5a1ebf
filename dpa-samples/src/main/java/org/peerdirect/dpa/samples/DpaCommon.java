package org.peerdirect.dpa.samples;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * The parts of DOCA's {@code samples/doca_dpa/dpa_common.c} (doca-samples 3.3) the DOCA samples of
 * {@code dpa:sample} call: {@code open_dpa_device}, {@code allocate_dpa_resources},
 * {@code destroy_dpa_resources} and the sync-event helpers, with their {@code DOCA_LOG_ERR} lines
 * at the C file's lines. One instance per sample run; the first failure's own message is kept in
 * {@link #causes} (DOCA prints only the error's description) so the command's error names it.
 *
 * <p>[model] No representors here, so no extended device ({@code rdma_dpa_ctx} is the PF's
 * context, its handle 0) and no EU affinities. The device log goes to a file of the sample's
 * through {@code doca_dpa_log_file_set_path}, printed when the context stops (a simulated process
 * has no standard output of its own); the context is stopped before it is destroyed (this
 * doca-dpa answers IN_USE to destroying a started context).
 */
final class DpaCommon {

    static final String COMMON = "dpa_common.c";
    /** {@code SYNC_EVENT_MASK_FFS}. */
    static final long SYNC_EVENT_MASK_FFS = -1L;

    /** {@code struct dpa_resources} as far as the samples use it. */
    static final class Resources {
        DocaDev pfDocaDevice;
        DocaDpa pfDpaCtx;
        Path log;

        /** {@code rdma_doca_device}: the PF's (no extended device [model]). */
        DocaDev rdmaDocaDevice() {
            return pfDocaDevice;
        }

        /** {@code rdma_dpa_ctx}: the PF's context (no extended context [model]). */
        DocaDpa rdmaDpaCtx() {
            return pfDpaCtx;
        }
    }

    private final DocaLog log;
    private final String sample;
    /** The failures' own messages, first first. */
    final List<String> causes = Collections.synchronizedList(new ArrayList<>());

    DpaCommon(DocaLog log, String sample) {
        this.log = log;
        this.sample = sample;
    }

    /**
     * The {@code main} every DOCA DPA sample has ({@code <sample>_main.c}): "Starting the sample",
     * {@code allocate_dpa_resources} with {@code app}, the sample's {@code logic}, then
     * {@code destroy_dpa_resources}, and "Sample finished successfully" or "with errors"; each
     * {@code DOCA_LOG_*} at its line of {@code file}: {@code lines} = start, allocation failed,
     * logic failed, destroy failed, finished, finished with errors. ARGP is not modelled.
     *
     * @throws IllegalStateException when the sample finished with errors, naming the first failure
     */
    void main(String file, int[] lines, String logicName, AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf,
            String pfDevice, FlexioApp app, Function<Resources, DocaError> logic) {
        log.info(file, lines[0], "main", "Starting the sample");
        Resources r = new Resources();
        boolean ok = false;
        DocaError result = allocateDpaResources(proc, devices, pciAddrOf, pfDevice, app, r);
        if (result != DocaError.DOCA_SUCCESS) {
            log.err(file, lines[1], "main", "Failed to Allocate DPA Resources", result);
        } else {
            result = logic.apply(r);
            if (result != DocaError.DOCA_SUCCESS) {
                log.err(file, lines[2], "main", logicName + "() encountered an error", result);
            } else {
                ok = true;
            }
            result = destroyDpaResources(r);
            if (result != DocaError.DOCA_SUCCESS) {
                log.err(file, lines[3], "main", "Failed to destroy DOCA DPA resources", result);
                ok = false;
            }
        }
        log.info(file, ok ? lines[4] : lines[5], "main", ok ? "Sample finished successfully" : "Sample finished with errors");
        if (!ok) {
            throw new IllegalStateException(String.join("; ", causes));
        }
    }

    /** Keeps {@code e}'s message as a cause; returns its {@code doca_error_t}. */
    DocaError failed(DocaException e) {
        causes.add(e.getMessage());
        return e.error();
    }

    /** {@code open_dpa_device}: the first PF with a DPA (or the one named). */
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

    /** {@code allocate_dpa_resources}: device, context, {@code app}, start; the device log to the sample's file. */
    DocaError allocateDpaResources(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice,
            FlexioApp app, Resources r) {
        try {
            r.log = Files.createTempFile("dpa_sample_" + sample, ".log"); // first: nothing to undo if it fails
        } catch (IOException e) {
            throw new UncheckedIOException("dpa:sample " + sample + ": a file for the device log", e);
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
            r.pfDpaCtx.setApp(app);
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
    DocaError destroyDpaResources(Resources r) {
        DocaError result = DocaError.DOCA_SUCCESS;
        try {
            r.pfDpaCtx.stop(); // the stream is drained when it goes
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
            throw new UncheckedIOException("dpa:sample " + sample + ": the device log's file", e);
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
    static DocaSyncEvent createWaitSyncEvent(Resources r) {
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
    static DocaSyncEvent createCompletionSyncEvent(Resources r) {
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

    /** A sample's {@code sleep}: a program's delay (what it shows), no synchronisation. */
    static void pause(long ms) {
        long end = System.nanoTime() + ms * 1_000_000;
        for (long left; (left = end - System.nanoTime()) > 0;) {
            LockSupport.parkNanos(left);
        }
    }
}
