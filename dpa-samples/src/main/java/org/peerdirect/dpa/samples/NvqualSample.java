package org.peerdirect.dpa.samples;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaEuAffinity;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.NvqualDev;
import org.peerdirect.dpa.samples.dev.NvqualDevStubs;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * DOCA's {@code dpa_nvqual} sample's host flow (DPA_MODEL.md §4 scenario 10), one iteration: the
 * EU bound from {@code doca_dpa_get_total_num_eus_available}; the available EUs found as the sample
 * finds them (a thread with strict affinity started on each EU id from 1: the DPA OS's EUs refuse
 * it); the user's excluded EUs taken out; one thread per used EU with strict affinity and its
 * local storage ({@code struct dpa_nvqual_tls}), the memory kernel on the first 3 EUs of each core
 * and the arithmetic kernel on the others, each with a notification completion; an RPC notifies
 * them all; the host waits until the CPU→DPA sync event passes {@code #threads - 1}, then copies
 * the results back ({@code doca_dpa_d2h_memcpy}) and checks each: it ran on its EU, saw no error,
 * counted cycles. Everything it made goes before it returns. {@code dpa:sample nvqual} runs it on
 * the first device with a DPA and prints the sample's JSON; {@code dpa:sample nvqual_fence} runs it
 * with the mutant memory kernel (no write-back of its result) on EUs 2, 3 and 16 and prints the
 * failures and the checker's finding. dpa-samples' {@code NvqualTest} and itest's
 * {@code DocaScenariosIT} run both (scenario 10).
 */
final class NvqualSample {

    /** {@code DPA_NVQUAL_NUM_EUS_PER_CORE}, {@code DPA_NVQUAL_NUM_MEMORY_EUS_PER_CORE}. */
    static final int EUS_PER_CORE = 16;
    static final int MEMORY_EUS_PER_CORE = 3;
    /** Bytes of each thread's buffer (the sample divides its 256 MiB heap; the model's heap is 4 MiB). */
    static final int BUFFER = 512;

    /** What the sample prints ({@code print_sample_data}) plus each used EU's virtual cycles, and what went wrong. */
    record Report(int totalHarts, List<Integer> available, List<Integer> used, List<Integer> unused, TreeMap<Integer, Long> cycles,
            List<String> failures) {

        List<Integer> unreachable() {
            List<Integer> u = new ArrayList<>();
            for (int eu = 1; eu < totalHarts; eu++) {
                if (!available.contains(eu)) {
                    u.add(eu);
                }
            }
            return u;
        }

        /** The sample's JSON, with the cycles per used EU. */
        String json(String device) {
            return "{\"data\": {\n\t\"device\": \"" + device + "\",\n\t\"total_harts\": " + totalHarts + ",\n\t\"available_harts\": "
                    + available + ",\n\t\"unreachable_harts\": " + unreachable() + ",\n\t\"used_harts\": " + used + ",\n\t\"unused_harts\": "
                    + unused + ",\n\t\"cycles\": " + cycles.values() + "\n}}";
        }
    }

    private NvqualSample() {
    }

    /** The sample's {@code get_available_eus}: EU ids from 1 on which a strictly pinned thread starts. */
    static List<Integer> availableEus(DocaDpa dpa, int total) {
        List<Integer> ok = new ArrayList<>();
        DocaDpaEuAffinity a = DocaDpaEuAffinity.create(dpa);
        try {
            for (int eu = 1; eu < total; eu++) {
                a.set(eu);
                DocaDpaThread t = DocaDpaThread.create(dpa);
                try {
                    t.setAffinity(a);
                    t.setFuncArg(NvqualDevStubs.DPA_NVQUAL_ARITHMETIC_STRESS_KERNEL, 0);
                    t.start();
                    ok.add(eu);
                } catch (DocaException e) {
                    if (e.error() != DocaError.DOCA_ERROR_DRIVER) {
                        throw e;
                    }
                } finally {
                    t.destroy();
                }
            }
        } finally {
            a.destroy();
        }
        return ok;
    }

    static Report run(DocaDpa dpa, DocaDev dev, Set<Integer> excluded, FlexioFunc memoryKernel, long memoryOps, long arithmeticOps,
            Duration bound) {
        int total = dpa.getTotalNumEusAvailable();
        List<Integer> available = availableEus(dpa, total);
        List<Integer> used = available.stream().filter(eu -> !excluded.contains(eu)).toList();
        List<Integer> unused = available.stream().filter(excluded::contains).toList();
        DocaException.check(!used.isEmpty(), DocaError.DOCA_ERROR_BAD_CONFIG, "nvqual: no available EU is left with the excluded EUs " + excluded);
        int n = used.size();
        DocaSyncEvent se = DocaSyncEvent.create();
        se.addPublisherLocationCpu(dev);
        se.addSubscriberLocationDpa(dpa);
        se.start();
        long seHandle = se.getDpaHandle(dpa);
        long handles = dpa.memAlloc(8L * n);
        long rets = dpa.memAlloc((long) NvqualDev.RET_SIZE * n);
        dpa.memset(rets, 0, (long) NvqualDev.RET_SIZE * n);
        DocaDpaEuAffinity aff = DocaDpaEuAffinity.create(dpa);
        List<DocaDpaThread> threads = new ArrayList<>();
        List<DocaDpaNotificationCompletion> notes = new ArrayList<>();
        List<Long> memory = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        TreeMap<Integer, Long> cycles = new TreeMap<>();
        try {
            for (int i = 0; i < n; i++) {
                int eu = used.get(i);
                boolean mem = eu % EUS_PER_CORE < MEMORY_EUS_PER_CORE;
                aff.set(eu);
                DocaDpaThread t = DocaDpaThread.create(dpa);
                threads.add(t);
                t.setAffinity(aff);
                long dst = dpa.memAlloc(BUFFER);
                memory.add(dst);
                long tls = dpa.memAlloc(NvqualDev.TLS_SIZE_BYTES);
                memory.add(tls);
                dpa.h2dMemcpy(tls, le(eu, rets + (long) NvqualDev.RET_SIZE * i, dst, BUFFER, mem ? memoryOps : arithmeticOps, seHandle));
                t.setFuncArg(mem ? memoryKernel : NvqualDevStubs.DPA_NVQUAL_ARITHMETIC_STRESS_KERNEL, 0);
                t.setLocalStorage(tls);
                t.start();
                DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
                notes.add(c);
                c.start();
                dpa.h2dMemcpy(handles + 8L * i, le(c.getDpaHandle()));
                t.run();
            }
            dpa.rpc(NvqualDevStubs.DPA_NVQUAL_ENTRY_POINT, handles, n);
            try {
                se.waitGt(n - 1, -1L, bound);
            } catch (DocaException e) {
                failures.add("waiting for " + n + " threads: " + e.getMessage());
            }
            ByteBuffer r = ByteBuffer.wrap(dpa.d2hMemcpy(rets, NvqualDev.RET_SIZE * n)).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < n; i++) {
                long c = r.getLong(NvqualDev.RET_SIZE * i + NvqualDev.RET_CYCLES);
                long ranOn = r.getLong(NvqualDev.RET_SIZE * i + NvqualDev.RET_EU);
                long errors = r.getLong(NvqualDev.RET_SIZE * i + NvqualDev.RET_ERRORS);
                cycles.put(used.get(i), c);
                if (ranOn != used.get(i) || errors != 0 || c <= 0) {
                    failures.add("EU " + used.get(i) + ": ran on " + ranOn + ", " + errors + " error(s), " + c + " cycles");
                }
            }
        } finally {
            notes.forEach(c -> {
                c.stop();
                c.destroy();
            });
            threads.forEach(DocaDpaThread::destroy);
            memory.forEach(dpa::memFree);
            dpa.memFree(rets);
            dpa.memFree(handles);
            aff.destroy();
            se.destroy();
        }
        return new Report(total, available, used, unused, cycles, failures);
    }

    /** The EUs the mutant runs on: a memory EU of core 0 twice (2, 3) and one of core 1 (16), the others excluded. */
    static final Set<Integer> FENCE_EUS = Set.of(2, 3, 16);

    /**
     * {@code dpa:sample nvqual [-e EU,...]} / {@code nvqual_fence}: on the first device with a DPA
     * (or {@code pfDevice}), a context of the app, one iteration ({@link #run}), its JSON, then
     * "passed" or each failure; the mutant also prints the checker's finding ({@code dpa:mm}'s
     * lines of the context's FlexIO process). Everything destroyed also when a step fails.
     *
     * @throws IllegalStateException when the qualification failed (not for the mutant, whose failure is the point)
     */
    static void sample(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, String pfDevice, Set<Integer> excluded,
            boolean mutant, EchoSample.Findings findings, Out out) {
        List<DocaDevinfo> list = DocaDevinfo.createList(proc, devices, pciAddrOf);
        DocaDev dev = null;
        try {
            for (DocaDevinfo i : list) {
                if (dev == null && DocaDpa.capIsSupported(i) && (pfDevice == null || pfDevice.equals(i.getIbdevName()))) {
                    dev = DocaDev.open(i);
                }
            }
        } finally {
            DocaDevinfo.destroyList(list);
        }
        if (dev == null) {
            throw new IllegalStateException("no device with a DPA" + (pfDevice == null ? "" : " named " + pfDevice) + " (only a BlueField-3 has one)");
        }
        try {
            DocaDpa dpa = DocaDpa.create(dev);
            boolean started = false;
            try {
                dpa.setApp(NvqualDevStubs.APP);
                dpa.start();
                started = true;
                Set<Integer> ex = excluded;
                if (mutant) {
                    ex = new java.util.HashSet<>();
                    for (int eu = 0; eu < dpa.getTotalNumEusAvailable(); eu++) {
                        if (!FENCE_EUS.contains(eu)) {
                            ex.add(eu);
                        }
                    }
                }
                Report r = run(dpa, dev, ex, mutant ? NvqualDevStubs.MEMORY_STRESS_NO_WRITEBACK : NvqualDevStubs.DPA_NVQUAL_MEMORY_STRESS_KERNEL,
                        MEMORY_OPS, ARITHMETIC_OPS, mutant ? Duration.ofSeconds(30) : Duration.ofSeconds(120));
                out.line("%s", r.json(dev.name()));
                if (r.failures().isEmpty()) {
                    out.line("qualification passed: %d EUs", r.used().size());
                } else {
                    r.failures().forEach(f -> out.line("qualification failed: %s", f));
                }
                if (mutant) {
                    out.line("%s", findings.of(dpa.flexioProcess().id()));
                } else if (!r.failures().isEmpty()) {
                    throw new IllegalStateException(r.failures().size() + " EU(s) failed the qualification");
                }
            } finally {
                if (started) {
                    dpa.stop();
                }
                dpa.destroy();
            }
        } finally {
            dev.close();
        }
    }

    /** Operations per memory and arithmetic kernel (the sample sizes them to its watchdog; these are short). */
    static final long MEMORY_OPS = 8;
    static final long ARITHMETIC_OPS = 50;

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }
}
