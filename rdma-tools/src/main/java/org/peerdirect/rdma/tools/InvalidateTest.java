package org.peerdirect.rdma.tools;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;

import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * {@code rdma:invalidate_test [-n N] [-s size] [--mem client]} (a peerdirect tool): RDMA WRITEs
 * into peer memory; half-way the application frees that memory (the peer client invalidates the
 * MR, as a GPU driver does on cudaFree), and the writes that follow complete with errors. Prints
 * the completions by status and checks that the freed memory saw no write after the free.
 */
final class InvalidateTest {

    static final String DESCRIPTION = "RDMA WRITEs into peer memory that is freed half-way: later writes complete with errors, none lands. "
            + "Example: rdma:invalidate_test --mem example_peer";

    private final ToolEnv env;

    InvalidateTest(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        Options o = new Options("rdma:invalidate_test", "RDMA WRITEs into peer memory freed half-way (the peer client invalidates)", args, List.of(
                Options.value("-n", "ITERS", "writes", 2000),
                Options.value("-s", "SIZE", "bytes per write", 4096),
                Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                DeviceLookup.serverOption(),
                Options.value("--mem", "MEM", "a peer client's name (default: the first offering memory)", null)));
        if (o.help()) {
            return o.printUsage();
        }
        int iters = (int) o.number("-n", 2, 10_000_000);
        int size = (int) o.number("-s", 8, 1 << 20);
        if (o.string("--mem") == null && env.allocators().isEmpty()) {
            throw new IllegalArgumentException("rdma:invalidate_test needs a peer memory client offering memory (--mem <name>)");
        }
        PeerMemoryAllocator mem = o.string("--mem") == null ? env.allocators().get(0) : PeerMemory.resolve(env, o);
        if (mem == null) {
            throw new IllegalArgumentException("rdma:invalidate_test: --mem must name a peer memory client, not host");
        }
        DeviceLookup.Pair p = DeviceLookup.pair(env, o);
        try (Endpoint server = new Endpoint(env, "invalidate-server", p.server(), size, 1, 16, mem);
                Endpoint client = new Endpoint(env, "invalidate-client", p.client(), size, 1, 16, null)) {
            Endpoint.connect(client, server, 0);
            Endpoint.connect(server, client, 0);
            return writes(client, server, size, iters);
        }
    }

    /** {@code iters} signalled writes, one at a time; the server's peer buffer freed before the middle one. */
    private static String writes(Endpoint client, Endpoint server, int size, int iters) {
        StringBuilder out = new StringBuilder();
        IbvSendWr w = new IbvSendWr().sge(client.buf, size, client.mr.lkey());
        w.opcode = IbvWrOpcode.RDMA_WRITE;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteAddr = server.buf;
        w.rkey = server.mr.rkey();
        IbvWc[] wc = {new IbvWc()};
        Map<IbvWcStatus, Integer> byStatus = new EnumMap<>(IbvWcStatus.class);
        int firstError = -1;
        for (int i = 0; i < iters; i++) {
            if (i == iters / 2) {
                out.append(String.format("after %d writes: %s frees the memory under the MR (the client invalidates it)%n", i, server.proc.name()));
                server.freePeerBuffer();
                out.append(String.format("  MR rkey 0x%x invalidated: %s%n", server.mr.rkey(), server.mr.invalidated()));
            }
            client.qps[0].postSend(w);
            awaitAny(client, wc);
            byStatus.merge(wc[0].status, 1, Integer::sum);
            if (wc[0].status != IbvWcStatus.SUCCESS && firstError < 0) {
                firstError = i;
                out.append(String.format("  write %d: %s (%s), QP now %s%n", i, wc[0].status, wc[0].status.str(), client.qps[0].state()));
            }
        }
        out.append("completions by status:\n");
        byStatus.forEach((st, c) -> out.append(String.format("  %-14s %d%n", st, c)));
        out.append(firstError == iters / 2 ? "the first write after the free failed; no write reached the freed memory (see kernel:iommu)"
                : "UNEXPECTED: first error at write " + firstError);
        return out.toString();
    }

    /** Polls (bounded) for one completion of any status: the failed ones are what this tool counts. */
    private static void awaitAny(Endpoint e, IbvWc[] wc) {
        long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
        for (int spins = 0; e.cq.poll(1, wc) == 0; spins++) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("no completion within 60 s");
            }
            Completions.relax(spins);
        }
    }
}
