package org.peerdirect.rdma.tools;

import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr.OdpCaps;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * What every perftest test does around its measuring loop (the body perftest's
 * {@code write_bw.c}, {@code read_bw.c}, {@code send_bw.c}, {@code write_lat.c} and
 * {@code atomic_bw.c} share): parse the parameters, pick the devices and the memory, set up both
 * sides with {@code -q} connected QPs, print the banner, run each size, print the rows.
 * {@code -a} sweeps 2 B … 8 MiB, each size moving at most 512 MiB.
 */
final class Perftest {

    private final ToolEnv env;
    private final PerftestParameters p;

    Perftest(ToolEnv env, PerftestParameters p) {
        this.env = env;
        this.p = p;
    }

    /**
     * What the server's device must offer: ATOMIC_WRITE for {@code -A ATOMIC_WRITE}; with
     * {@code --odp} the RC ODP bits rdma-core's {@code test_odp.py} asks for the operation (SEND for
     * the requester's buffer, and the operation's own bit); dma-buf MRs with {@code --dmabuf}.
     */
    static DeviceLookup.Needs needs(PerftestParameters p) {
        DeviceLookup.Needs n = DeviceLookup.Needs.NONE.dmabuf(p.dmabuf);
        if (p.op == IbvWrOpcode.ATOMIC_WRITE) {
            n = n.caps(IbvDeviceAttr.DEVICE_ATOMIC_WRITE, 0);
        }
        if (p.odp) {
            n = n.rcOdp(false, OdpCaps.SUPPORT_SEND | switch (p.op) {
                case RDMA_WRITE -> OdpCaps.SUPPORT_WRITE;
                case RDMA_READ -> OdpCaps.SUPPORT_READ;
                case ATOMIC_WRITE -> OdpCaps.SUPPORT_ATOMIC_WRITE;
                case ATOMIC_FETCH_AND_ADD, ATOMIC_CMP_AND_SWP -> OdpCaps.SUPPORT_ATOMIC;
                default -> OdpCaps.SUPPORT_RECV;
            });
        }
        return n;
    }

    String run() {
        Options o = p.o;
        if (o.help()) {
            return o.printUsage();
        }
        p.parse();
        PeerMemoryAllocator mem = PeerMemory.resolve(env, o);
        long bufSize = Math.max(4096, 2L * p.maxSize());
        if (p.dmabuf && mem == null) {
            throw new UsageException(o.tool() + ": --dmabuf registers peer memory exported as a dma-buf: give --mem <peer client>");
        }
        Remote remote = PerftestParameters.acrossHosts(o.tool().substring("rdma:".length()), p.latency) && !p.atomic
                ? Remote.of(o, "-x", true, List.of("--server-dev")) : null;
        if (remote != null && p.all && (p.op == IbvWrOpcode.SEND || p.latency)) {
            throw new UsageException(o.tool() + ": -a is not supported with --server/--client yet: perftest's send and latency tests "
                    + "synchronise both sides between sizes; give one size with -s");
        }
        if (remote != null) { // one side here, the other elsewhere: perftest's out-of-band exchange
            return new PerftestRemote(env, p).run(remote, mem);
        }
        DeviceLookup.Pair devs = DeviceLookup.pair(env, o, needs(p));
        Buffers.Odp odp = p.odp ? Buffers.Odp.EXPLICIT : Buffers.Odp.NONE;
        int extra = p.huge ? IbAccess.HUGETLB : 0;
        StringBuilder out = new StringBuilder();
        try (Endpoint server = new Endpoint(env, "perftest-server", devs.server(), bufSize, p.qps, p.depth, mem, false, odp, -1, p.dmabuf, extra);
                Endpoint client = new Endpoint(env, "perftest-client", devs.client(), bufSize, p.qps, p.depth, mem, false, odp, -1, p.dmabuf,
                        extra)) {
            for (int q = 0; q < p.qps; q++) {
                Endpoint.connect(client, server, q);
                Endpoint.connect(server, client, q);
            }
            PerftestReport.banner(out, p, devs.client(), client.gid != null, mem);
            for (int s : p.sizes) {
                int n = p.itersFor(s);
                PerftestResult r = p.latency ? PerftestResources.runIterLatWrite(client, server, s, n)
                        : PerftestResources.runIterBw(p.op, p.title, client, server, s, n, p.qps, p.depth);
                out.append(r.row()).append('\n');
                if (p.jsonFile != null) {
                    PerftestJson.write(p.jsonFile, p, devs.client().name(), client.gid != null, r);
                }
            }
            if (p.atomic && mem == null) {
                out.append(PerftestResources.checkAtomicWord(p.op, server, p.iters, p.qps)).append('\n');
            }
            long superpages = p.huge ? env.superpages() : -1;
            if (superpages >= 0) {
                out.append(PerftestReport.superpages(superpages));
            }
            out.append(PerftestReport.LINE);
        }
        return out.toString();
    }
}
