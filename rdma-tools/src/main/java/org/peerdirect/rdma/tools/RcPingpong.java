package org.peerdirect.rdma.tools;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * {@code rdma:pingpong}: SEND/RECV ping-pong on an RC QP pair, as {@code ibv_rc_pingpong}
 * (rdma-core {@code libibverbs/examples/rc_pingpong.c}): {@code -s} size, {@code -n} iterations,
 * {@code -e} events, {@code -o}/{@code -O} (implicit) ODP, {@code -P} prefetch, {@code -c}
 * validate, {@code -d} device, {@code --mem host|<peer client>}, {@code --dmabuf}. The server side
 * runs on its own thread, as the other host's program would.
 */
final class RcPingpong {

    static final String DESCRIPTION = "SEND/RECV ping-pong between two simulated processes, as ibv_rc_pingpong. "
            + "Example: rdma:pingpong -s 4096 -n 1000 -c";

    private final ToolEnv env;

    RcPingpong(ToolEnv env) {
        this.env = env;
    }

    /** What the options asked for, checked against each other. */
    private record Params(int size, int iters, boolean events, boolean validate, boolean implicit, boolean odp, int dropEvery, boolean prefetch,
            boolean dmabuf) {
        Buffers.Odp mode() {
            return implicit ? Buffers.Odp.IMPLICIT : odp ? Buffers.Odp.EXPLICIT : Buffers.Odp.NONE;
        }
    }

    private static Options options(Object[] args) {
        return new Options("rdma:pingpong", "SEND/RECV ping-pong on an RC QP pair, as ibv_rc_pingpong", args, List.of(
                Options.value("-s", "SIZE", "message size in bytes (K/M suffixes)", 4096),
                Options.value("-n", "ITERS", "round trips", 1000),
                Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                DeviceLookup.serverOption(),
                PeerMemory.option(),
                Options.flag("-e", "sleep on the completion channel instead of polling"),
                Options.flag("-o", "register the buffers on demand (ODP): nothing pinned, the devices fault the pages in"),
                Options.flag("-O", "implicit ODP: one on-demand MR over the whole address space (address 0, length SIZE_MAX); implies -o"),
                Options.flag("-P", "with -o or --dmabuf: prefetch the buffers into the devices (ibv_advise_mr PREFETCH_WRITE, FLUSH), after each drop too"),
                Options.value("--drop-every", "N", "with -o: the client drops its buffer (madvise DONTNEED) before every N-th message, so both "
                        + "devices fault it in again (0: never; a peerdirect addition)", 0),
                Options.flag("--dmabuf", "with --mem: register the peer buffers as dma-buf MRs (ibv_reg_dmabuf_mr), not through the peer client"),
                Options.flag("-c", "validate every received buffer")), Remote.options("-g"));
    }

    /** What a run across hosts cannot honour: the second local device and the options of its buffer's lifecycle. */
    private static final List<String> LOCAL_ONLY = List.of("--server-dev", "--drop-every", "-P", "--dmabuf");

    /** The options' values; usage errors for combinations ibv_rc_pingpong refuses. */
    private static Params params(Options o) {
        boolean events = o.flag("-e");
        int size = (int) o.number("-s", 1, 1 << 24);
        int iters = (int) o.number("-n", 1, 100_000_000);
        boolean validate = o.flag("-c");
        boolean implicit = o.flag("-O");
        boolean odp = o.flag("-o") || implicit;
        int dropEvery = (int) o.number("--drop-every", 0, 100_000_000);
        if (dropEvery > 0 && !odp) {
            throw new UsageException("rdma:pingpong: --drop-every drops pages under an ODP registration: give -o too");
        }
        boolean prefetch = o.flag("-P");
        boolean dmabuf = o.flag("--dmabuf");
        if (prefetch && !odp && !dmabuf) {
            throw new UsageException("rdma:pingpong: prefetch (-P) is valid only with an on-demand memory region (-o) or a dma-buf MR (--dmabuf)");
        }
        return new Params(size, iters, events, validate, implicit, odp, dropEvery, prefetch, dmabuf);
    }

    String run(Object[] args) throws InterruptedException {
        Options o = options(args);
        if (o.help()) {
            return o.printUsage();
        }
        Params pp = params(o);
        PeerMemoryAllocator mem = PeerMemory.resolve(env, o);
        Remote remote = Remote.of(o, "-g", true, LOCAL_ONLY);
        if (remote != null) { // one side here, the other elsewhere: ibv_rc_pingpong's out-of-band exchange
            return new RcPingpongRemote(env).run(o, remote, pp.size(), pp.iters(), pp.events(), pp.validate(), pp.mode(), mem);
        }
        if (pp.dmabuf() && (mem == null || pp.odp())) {
            throw new UsageException("rdma:pingpong: --dmabuf registers peer memory exported as a dma-buf: give --mem <peer client>, without -o");
        }
        DeviceLookup.Needs needs = DeviceLookup.Needs.NONE.dmabuf(pp.dmabuf());
        if (pp.odp()) { // both ends send and receive into their ODP buffers
            needs = needs.rcOdp(pp.implicit(), IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_RECV);
        }
        DeviceLookup.Pair p = DeviceLookup.pair(env, o, needs);
        try (Endpoint server = new Endpoint(env, "rc_pingpong-server", p.server(), pp.size(), 1, 16, mem, pp.events(), pp.mode(), -1, pp.dmabuf(), 0);
                Endpoint client = new Endpoint(env, "rc_pingpong-client", p.client(), pp.size(), 1, 16, mem, pp.events(), pp.mode(), -1,
                        pp.dmabuf(), 0)) {
            Endpoint.connect(client, server, 0);
            Endpoint.connect(server, client, 0);
            StringBuilder out = new StringBuilder();
            if (pp.prefetch()) {
                for (Endpoint e : List.of(client, server)) {
                    String err = prefetch(e);
                    if (err != null) { // as ibv_rc_pingpong: a failed prefetch is not fatal
                        out.append("Couldn't prefetch MR (").append(err).append("). Continue anyway\n");
                    }
                }
            }
            out.append("  local address:  ").append(client.address()).append('\n');
            out.append("  remote address: ").append(server.address()).append('\n');
            long bar0 = env.barBytes();
            long usec = exchange(client, server, pp);
            report(out, pp, usec, mem, bar0);
            return out.toString();
        }
    }

    /**
     * Both sides, the server on its own thread: the first failure of either ends both (the
     * client's interrupts the server, which would wait for messages that never come), bounded by
     * {@link Completions#TIMEOUT_NS}. The client's elapsed microseconds.
     */
    private static long exchange(Endpoint client, Endpoint server, Params pp) throws InterruptedException {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread srv = Thread.ofPlatform().name("rc_pingpong-server").start(() -> {
            try {
                side(server, pp, false);
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        });
        long t0 = System.nanoTime();
        try {
            side(client, pp, true);
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
            srv.interrupt(); // the server would wait for messages that never come
        }
        try {
            srv.join(Completions.TIMEOUT_NS / 1_000_000);
        } finally {
            if (srv.isAlive()) { // interrupted (Ctrl-C) or timed out: stop it before the endpoints close
                srv.interrupt();
                srv.join(5_000);
            }
        }
        long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
        if (srv.isAlive()) {
            failure.compareAndSet(null, new IllegalStateException("server side did not finish within 60 s"));
        }
        if (failure.get() != null) {
            throw new IllegalStateException("rdma:pingpong: " + failure.get().getMessage(), failure.get());
        }
        return usec;
    }

    /** ibv_rc_pingpong's two result lines, then what the options changed. */
    private void report(StringBuilder out, Params pp, long usec, PeerMemoryAllocator mem, long bar0) {
        long bytes = (long) pp.size() * pp.iters() * 2;
        out.append(String.format("%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8.0 / usec));
        out.append(String.format("%d iters in %.2f seconds = %.2f usec/iter", pp.iters(), usec / 1e6, (double) usec / pp.iters()));
        if (pp.events()) {
            out.append(String.format("%ncompletions waited for on completion channels (-e)"));
        }
        if (pp.validate()) {
            out.append(String.format("%nvalidated %d received buffers of %d bytes on both sides: no mismatch", pp.iters(), pp.size()));
        }
        if (mem != null && bar0 >= 0) {
            out.append(String.format("%nbuffers in %s memory%s; IOMMU: %d bytes crossed PCI BARs peer to peer (the HCAs reaching the device's BAR)",
                    mem.name(), pp.dmabuf() ? ", registered as dma-buf MRs (ibv_reg_dmabuf_mr)" : "", env.barBytes() - bar0));
            if (pp.dmabuf() && pp.prefetch()) {
                out.append(String.format("%ndma-buf MRs prefetched (ibv_advise_mr PREFETCH_WRITE with FLUSH: mlx5 maps the whole buffer)"));
            }
        }
        if (pp.odp()) {
            out.append(String.format("%nbuffers registered on demand (%s)%s", pp.implicit() ? "implicit ODP: one MR over the whole address space" : "ODP",
                    pp.dropEvery() > 0 ? String.format("; the client dropped its buffer %d times (madvise DONTNEED)",
                            (pp.iters() + pp.dropEvery() - 1) / pp.dropEvery()) : ""));
            if (pp.prefetch()) {
                out.append(String.format("%nbuffers prefetched (ibv_advise_mr PREFETCH_WRITE with FLUSH)%s",
                        pp.dropEvery() > 0 ? ", the client's after every drop" : ""));
            }
        }
    }

    /**
     * One side of the ping-pong: the client sends first, the server answers each message. Send
     * and receive completions share the CQ and may arrive in either order.
     */
    private static void side(Endpoint e, Params pp, boolean client) {
        int size = pp.size();
        int iters = pp.iters();
        boolean validate = pp.validate();
        int dropEvery = client ? pp.dropEvery() : 0;
        boolean prefetch = client && pp.prefetch();
        String who = client ? "client" : "server";
        IbvWc[] wc = {new IbvWc()};
        IbvRecvWr rwr = new IbvRecvWr().sge(e.buf, size, e.mr.lkey());
        IbvSendWr swr = new IbvSendWr().sge(e.buf, size, e.mr.lkey());
        swr.opcode = IbvWrOpcode.SEND;
        swr.sendFlags = IbvSendWr.SEND_SIGNALED;
        byte[] pattern = validate ? new byte[size] : null;
        byte[] got = validate ? new byte[size] : null;
        int sends = 0;
        int recvs = 0;
        e.qps[0].postRecv(rwr);
        if (client) {
            drop(e, dropEvery, 0, prefetch);
            fill(e, validate, pattern, size, 0);
            e.qps[0].postSend(swr);
        }
        while (sends < iters || recvs < iters) {
            IbvWc c = e.channel != null ? Completions.waitEvent(e, wc, who) : Completions.waitOk(e.cq, wc, who);
            if (c.opcode == IbvWcOpcode.RECV) {
                if (validate) {
                    Arrays.fill(pattern, (byte) recvs);
                }
                check(e, validate, pattern, got, size, recvs, who);
                recvs++;
                if (recvs < iters) {
                    e.qps[0].postRecv(rwr);
                }
                if (!client) {
                    e.qps[0].postSend(swr); // echo what arrived
                }
            } else {
                sends++;
            }
            if (client && sends == recvs && sends < iters) { // both halves of the round trip are done: next message
                drop(e, dropEvery, sends, prefetch);
                fill(e, validate, pattern, size, sends);
                e.qps[0].postSend(swr);
            }
        }
    }

    /**
     * {@code --drop-every}: before message {@code i}, the buffer's pages go ({@code MADV_DONTNEED});
     * the posted receive still points at them, so the echo faults them in on the device again,
     * unless {@code -P} prefetches them back first.
     */
    private static void drop(Endpoint e, int dropEvery, int i, boolean prefetch) {
        if (dropEvery > 0 && i % dropEvery == 0) {
            e.proc.madvise(e.buf, e.size, AddressSpace.Advice.MADV_DONTNEED);
            if (prefetch) {
                String err = prefetch(e);
                if (err != null) {
                    throw new IllegalStateException("prefetch after a drop failed: " + err);
                }
            }
        }
    }

    /** {@code ibv_rc_pingpong -P}: the whole buffer, writable, synchronously; the error, or null. */
    private static String prefetch(Endpoint e) {
        try {
            e.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(e.buf, (int) e.size, e.mr.lkey()));
            return null;
        } catch (KernelException ex) {
            return ex.getMessage();
        }
    }

    private static void fill(Endpoint e, boolean validate, byte[] pattern, int size, int iter) {
        if (validate) {
            Arrays.fill(pattern, (byte) iter);
            e.write(e.buf, pattern, 0, size);
        }
    }

    private static void check(Endpoint e, boolean validate, byte[] pattern, byte[] got, int size, int iter, String who) {
        if (!validate) {
            return;
        }
        e.read(e.buf, got, 0, size);
        if (!Arrays.equals(pattern, got)) {
            throw new IllegalStateException(who + ": received buffer of iteration " + iter + " does not hold the sent bytes");
        }
    }
}
