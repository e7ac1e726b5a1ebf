package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.progs.EuProgs;
import org.peerdirect.doca.dpa.progs.EuProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioFunc;

/**
 * DOCA's {@code dpa_nvqual} sample's host flow (DPA_MODEL.md §4 scenario 10), one iteration: the
 * EU bound from {@code doca_dpa_get_total_num_eus_available}; the available EUs found as the sample
 * finds them (a thread with strict affinity started on each EU id from 1: the DPA OS's EUs refuse
 * it); the user's excluded EUs taken out; one thread per used EU with strict affinity and its
 * local storage ({@code struct dpa_nvqual_tls}), the memory kernel on the first 3 EUs of each core
 * and the arithmetic kernel on the others, each with a notification completion; an RPC notifies
 * them all; the host waits until the CPU→DPA sync event passes {@code #threads - 1}, then copies
 * the results back ({@code doca_dpa_d2h_memcpy}) and checks each: it ran on its EU, saw no error,
 * counted cycles. Everything it made goes before it returns.
 */
final class Nvqual {

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

    private Nvqual() {
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
                    t.setFuncArg(EuProgsStubs.ARITHMETIC_STRESS, 0);
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
        long rets = dpa.memAlloc((long) EuProgs.RET_SIZE * n);
        dpa.memset(rets, 0, (long) EuProgs.RET_SIZE * n);
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
                long tls = dpa.memAlloc(EuProgs.TLS_SIZE_BYTES);
                memory.add(tls);
                dpa.h2dMemcpy(tls, le(eu, rets + (long) EuProgs.RET_SIZE * i, dst, BUFFER, mem ? memoryOps : arithmeticOps, seHandle));
                t.setFuncArg(mem ? memoryKernel : EuProgsStubs.ARITHMETIC_STRESS, 0);
                t.setLocalStorage(tls);
                t.start();
                DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
                notes.add(c);
                c.start();
                dpa.h2dMemcpy(handles + 8L * i, le(c.getDpaHandle()));
                t.run();
            }
            dpa.rpc(EuProgsStubs.ENTRY_POINT, handles, n);
            try {
                se.waitGt(n - 1, -1L, bound);
            } catch (DocaException e) {
                failures.add("waiting for " + n + " threads: " + e.getMessage());
            }
            ByteBuffer r = ByteBuffer.wrap(dpa.d2hMemcpy(rets, EuProgs.RET_SIZE * n)).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < n; i++) {
                long c = r.getLong(EuProgs.RET_SIZE * i + EuProgs.RET_CYCLES);
                long ranOn = r.getLong(EuProgs.RET_SIZE * i + EuProgs.RET_EU);
                long errors = r.getLong(EuProgs.RET_SIZE * i + EuProgs.RET_ERRORS);
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

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }
}
