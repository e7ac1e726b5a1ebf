package org.peerdirect.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.bench.dpa.BenchDevStubs;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;

/**
 * Issue 42's FlexIO figures on a BlueField-3 (mlx5_core and mlx5_ib, a user process, FlexIO's host
 * library over DevX), each beside its reference in the same run:
 * <ul>
 * <li>{@code processCall}: {@code flexio_process_call} of a two-argument RPC that adds them, host
 *     to DPA and back (one RDMA WRITE-with-immediate triggers the RPC handler, the answer comes back
 *     through a window into a host mailbox); its reference {@code writeImmRoundTrip}: a host RDMA
 *     WRITE-with-immediate round trip between two mlx5 RC QPs (an echo thread answers each with
 *     one), and {@link PingPongBench}'s {@code rc} when run in the same command;</li>
 * <li>CQE written → handler entry, p50 and p99: the trigger of every activation of the trial
 *     ({@code processCall}'s, a CQE on the RPC handler's armed CQ) to the handler's entry, sampled by
 *     the silicon and printed at the trial's end ({@code # dpa wake}); its reference
 *     {@code ringHandoff}: a two-thread hand-off of a time stamp through a memory word, the spinning
 *     receiver's p50 and p99 printed the same way ({@code # ring handoff});</li>
 * <li>{@code host2devMemcpy64k}: {@code flexio_host2dev_memcpy} of 64 KiB into the process heap
 *     (the runtime's loopback RC QP, RDMA WRITE through the heap's DUMEM mkey, the IOMMU on the host
 *     side); its reference {@code segmentCopy64k}: {@code MemorySegment.copy} of 64 KiB.</li>
 * </ul>
 * <li>{@code checked0} and {@code checked1k} per checker mode ({@code check} = strict, warn, off):
 *     an RPC doing 0 or 1000 times a store plus {@code __dpa_thread_memory_writeback}; the cost per
 *     store and write-back is their difference / 1000;</li>
 * <li>{@code objects1k} per checker mode: an RPC marking 1000 times an object in use and free
 *     again (C8's annotations, {@code Dpa.objectEnter}/{@code objectLeave}); against {@code checked0},
 *     the check's cost per marked device-library call (off: a field check).</li>
 * </ul>
 * Wall time from JMH; the DPA's virtual cycles (the EUs' counters, as {@code dpa:eus} shows them) per
 * activation are printed at each trial's end ({@code # dpa cycles}). No hardware latency is
 * invented here.
 *
 * <pre>./peerdirect bench -f 1 'DpaBench|PingPongBench.rc'</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DpaBench {

    static final int COPY = 64 * 1024;

    /** A host with one BlueField-3 and a FlexIO process of {@code bench_dpa}. */
    @State(Scope.Benchmark)
    public static class Host {
        Path dir;
        Mm mm;
        StandalonePciBus bus;
        IbCore core;
        ConnectX4Device bf3;
        Mlx5CoreDev mlx5;
        Mlx5IbDev ib;
        IbvContext ctx;
        AddressSpace proc;
        FlexioProcess process;
        long haddr;
        long daddr;
        long a;

        @Setup(Level.Trial)
        public void up() throws Exception {
            up(null);
        }

        /** The host, its DPA's checker in {@code check} mode (null: the model's default, strict). */
        void up(String check) throws Exception {
            dir = Files.createTempDirectory("peerdirect-dpabench");
            mm = new Mm(256L << 20, true, dir.resolve("swap"), 1 << 20);
            bus = new StandalonePciBus(new Iommu(mm));
            core = new IbCore(null);
            bf3 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3),
                    ConnectX4Device.DEVICE_BLUEFIELD3, new Fabric());
            mlx5 = new Mlx5CoreDev("mlx5_0", bus.register(bf3.spec()), mm, Mlx5CoreDev.Settings.DEFAULT);
            mlx5.load();
            if (check != null) {
                bf3.dpaCheckMode(check);
            }
            ib = new Mlx5IbDev(mlx5, core.umems());
            IbvDevice dev = core.register(ib);
            proc = mm.createProcess("dpa-bench");
            proc.setMemlockLimit(128L << 20);
            ctx = dev.open(proc);
            process = FlexioProcess.create(ctx, BenchDevStubs.APP, new FlexioProcess.Attr(1 << 20, Duration.ofSeconds(30)));
            haddr = proc.mmap(COPY);
            for (long off = 0; off < COPY; off += 4096) {
                proc.writeLong(haddr + off, off); // touched: the copy measures the transfer, not first faults
            }
            daddr = process.bufDevAlloc(COPY);
            if (daddr == 0) {
                throw new IllegalStateException("no 64 KiB in the DPA heap");
            }
            if (process.call(BenchDevStubs.ADD, 40L, 2L) != 42) {
                throw new IllegalStateException("the RPC does not add");
            }
            bf3.dpaWakeNanos(true, 50);
            eu0 = bf3.dpaEuTotals();
        }

        long[] eu0;

        /** The trial's DPA figures: wake latency percentiles and virtual cycles per activation. */
        String figures() {
            long[] w = bf3.dpaWakeNanos(false, 50, 99);
            long[] eu = bf3.dpaEuTotals();
            long acts = eu[0] - eu0[0];
            return String.format("# dpa wake (CQE written -> handler entry): p50 %d ns, p99 %d ns%n# dpa cycles: %s", w[0], w[1],
                    acts == 0 ? "no activation" : String.format("%d activations, %.1f virtual cycles and %.1f instructions each", acts,
                            (double) (eu[1] - eu0[1]) / acts, (double) (eu[2] - eu0[2]) / acts));
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            System.out.println(figures());
            process.bufDevFree(daddr);
            process.destroy();
            ctx.close();
            proc.munmap(haddr, COPY);
            core.unregister(ib);
            ib.close();
            mlx5.unload();
            proc.exit();
            mm.close();
        }
    }

    /** A host whose DPA checks the memory model in mode {@code check}, and a 512-byte heap block for the stores. */
    @State(Scope.Benchmark)
    public static class Checked {
        @Param({"strict", "warn", "off"})
        public String check;
        final Host host = new Host();
        FlexioProcess process;
        long block;

        @Setup(Level.Trial)
        public void up() throws Exception {
            host.up(check);
            process = host.process;
            block = process.bufDevAlloc(512);
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            System.out.println("# checker " + check);
            process.bufDevFree(block);
            host.down();
        }
    }

    /** Two threads and a time stamp: the reference hand-off, its receiver's latencies kept. */
    @State(Scope.Benchmark)
    public static class Handoff {
        private static final java.lang.invoke.VarHandle STAMP;
        private static final java.lang.invoke.VarHandle ACK;

        static {
            try {
                java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
                STAMP = l.findVarHandle(Handoff.class, "stamp", long.class);
                ACK = l.findVarHandle(Handoff.class, "ack", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        long p0, p1, p2, p3, p4, p5, p6, p7;
        volatile long stamp;
        long q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12, q13, q14, q15;
        volatile long ack;
        long r0, r1, r2, r3, r4, r5, r6, r7;
        /** The receiver's samples (its thread writes them; read after it stopped). */
        final long[] samples = new long[1 << 20];
        int taken;
        volatile boolean stop;
        Thread receiver;

        @Setup(Level.Trial)
        public void start() {
            stop = false;
            receiver = Thread.ofPlatform().daemon().name("handoff-receiver").start(() -> {
                long last = 0;
                while (!stop) {
                    long s = (long) STAMP.getAcquire(this);
                    if (s == last) {
                        Thread.onSpinWait();
                        continue;
                    }
                    long now = System.nanoTime();
                    samples[taken++ & (samples.length - 1)] = now - s;
                    last = s;
                    ACK.setRelease(this, s);
                }
            });
        }

        @TearDown(Level.Trial)
        public void stop() throws InterruptedException {
            stop = true;
            receiver.join(5_000);
            long[] s = java.util.Arrays.copyOf(samples, Math.min(taken, samples.length));
            java.util.Arrays.sort(s);
            System.out.printf("# ring handoff (stamp written -> receiver sees it): p50 %d ns, p99 %d ns over %d%n",
                    s.length == 0 ? 0 : s[(int) Math.ceil(0.50 * s.length) - 1], s.length == 0 ? 0 : s[(int) Math.ceil(0.99 * s.length) - 1],
                    s.length);
        }
    }

    /** Two mlx5 RC QPs and an echo thread answering each RDMA WRITE-with-immediate with one: the RPC's host reference. */
    @State(Scope.Benchmark)
    public static class WriteImm {
        RdmaRig rig;
        final org.peerdirect.ib.core.verbs.IbvSendWr send = new org.peerdirect.ib.core.verbs.IbvSendWr();
        final org.peerdirect.ib.core.verbs.IbvRecvWr recv = new org.peerdirect.ib.core.verbs.IbvRecvWr();
        final org.peerdirect.ib.core.verbs.IbvWc[] wc = {new org.peerdirect.ib.core.verbs.IbvWc()};
        volatile boolean stop;
        final java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        Thread echo;

        @Setup(Level.Trial)
        public void setup() throws Exception {
            rig = new RdmaRig("mlx5", 64L << 20, 1L << 20, 1, 64);
            RdmaRig.Conn c = rig.conns[0];
            send.sge(rig.a.buf, 8, rig.a.mr.lkey());
            send.opcode = org.peerdirect.ib.core.verbs.IbvWrOpcode.RDMA_WRITE_WITH_IMM;
            send.sendFlags = org.peerdirect.ib.core.verbs.IbvSendWr.SEND_SIGNALED;
            send.remoteAddr = rig.b.buf + 4096;
            send.rkey = rig.b.mr.rkey();
            recv.sge(rig.a.buf + 8192, 8, rig.a.mr.lkey());
            org.peerdirect.ib.core.verbs.IbvSendWr back = new org.peerdirect.ib.core.verbs.IbvSendWr().sge(rig.b.buf, 8, rig.b.mr.lkey());
            back.opcode = org.peerdirect.ib.core.verbs.IbvWrOpcode.RDMA_WRITE_WITH_IMM;
            back.sendFlags = org.peerdirect.ib.core.verbs.IbvSendWr.SEND_SIGNALED;
            back.remoteAddr = rig.a.buf + 4096;
            back.rkey = rig.a.mr.rkey();
            org.peerdirect.ib.core.verbs.IbvRecvWr srecv = new org.peerdirect.ib.core.verbs.IbvRecvWr().sge(rig.b.buf + 8192, 8,
                    rig.b.mr.lkey());
            for (int i = 0; i < 16; i++) {
                c.aqp.postRecv(recv);
                c.bqp.postRecv(srecv);
            }
            stop = false;
            echo = Thread.ofPlatform().daemon().name("writeimm-echo").start(() -> {
                org.peerdirect.ib.core.verbs.IbvWc[] swc = {new org.peerdirect.ib.core.verbs.IbvWc()};
                try {
                    while (!stop) {
                        int k = c.bcq.poll(1, swc);
                        if (k == 0) {
                            Thread.onSpinWait();
                            continue;
                        }
                        if (k < 0 || swc[0].status != org.peerdirect.ib.core.verbs.IbvWcStatus.SUCCESS) {
                            throw new IllegalStateException("echo: " + (k < 0 ? "CQ in error" : swc[0].toString()));
                        }
                        if (swc[0].opcode == org.peerdirect.ib.core.verbs.IbvWcOpcode.RECV_RDMA_WITH_IMM) {
                            c.bqp.postRecv(srecv);
                            back.immData = swc[0].immData;
                            c.bqp.postSend(back);
                        }
                    }
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            stop = true;
            echo.join(5_000);
            rig.close();
            if (failure.get() != null) {
                throw new IllegalStateException("the echo failed", failure.get());
            }
        }
    }

    /** The reference copy's two 64 KiB segments. */
    @State(Scope.Benchmark)
    public static class Copy {
        final Arena arena = Arena.ofShared();
        final MemorySegment src = arena.allocate(COPY, 64);
        final MemorySegment dst = arena.allocate(COPY, 64);

        @TearDown(Level.Trial)
        public void down() {
            arena.close();
        }
    }

    @Benchmark
    public long processCall(Host h) {
        return h.process.call(BenchDevStubs.ADD, h.a++, 1L);
    }

    /** One WRITE-with-immediate there and one back: the send's completion and the answer's receive. */
    @Benchmark
    public int writeImmRoundTrip(WriteImm w) {
        RdmaRig.Conn c = w.rig.conns[0];
        w.send.immData++;
        c.aqp.postSend(w.send);
        int imm = 0;
        for (int got = 0; got < 2; ) {
            int k = c.acq.poll(1, w.wc);
            if (k == 0) {
                if (w.failure.get() != null) {
                    throw new IllegalStateException("the echo failed", w.failure.get());
                }
                Thread.onSpinWait();
                continue;
            }
            if (k < 0 || w.wc[0].status != org.peerdirect.ib.core.verbs.IbvWcStatus.SUCCESS) {
                throw new IllegalStateException(k < 0 ? "CQ in error" : w.wc[0].toString());
            }
            if (w.wc[0].opcode == org.peerdirect.ib.core.verbs.IbvWcOpcode.RECV_RDMA_WITH_IMM) {
                imm = w.wc[0].immData;
                c.aqp.postRecv(w.recv);
            }
            got++;
        }
        return imm;
    }

    /** One time stamp handed to the spinning receiver and its acknowledgement. */
    @Benchmark
    public long ringHandoff(Handoff h) {
        long s = System.nanoTime();
        Handoff.STAMP.setRelease(h, s);
        while ((long) Handoff.ACK.getAcquire(h) != s) {
            Thread.onSpinWait();
        }
        return s;
    }

    /** The stores RPC with no store: the call's own cost under the mode. */
    @Benchmark
    public long checked0(Checked c) {
        return c.process.call(BenchDevStubs.STORES, 0L, c.block);
    }

    /** 1000 stores, each written back. */
    @Benchmark
    public long checked1k(Checked c) {
        return c.process.call(BenchDevStubs.STORES, 1000L, c.block);
    }

    /** 1000 enter/leave pairs on one object (C8). */
    @Benchmark
    public long objects1k(Checked c) {
        return c.process.call(BenchDevStubs.OBJECTS, 1000L, c.block);
    }

    @Benchmark
    public void host2devMemcpy64k(Host h) {
        h.process.host2devMemcpy(h.haddr, COPY, h.daddr);
    }

    @Benchmark
    public MemorySegment segmentCopy64k(Copy c) {
        MemorySegment.copy(c.src, 0, c.dst, 0, COPY);
        return c.dst;
    }
}
