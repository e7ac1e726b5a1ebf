package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.AfterProperty;
import net.jqwik.api.lifecycle.BeforeProperty;

import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Qp;

/**
 * Fuzzes the send WQEs the ConnectX-4 model fetches from a user process's queue buffer, through
 * the real stack of {@link Mlx5VerbsTest}: two models on one fabric, mlx5_core and mlx5_ib, ib-core,
 * libmlx5's data path.
 *
 * <p>The process writes into its own memory what it likes: the test finds the send queue the
 * library allocated for a QP as a process would (the one mapping {@code ibv_create_qp} added to
 * its address space, {@code /proc/self/maps}; its layout from {@link Mlx5Qp#geometry}, the RQ
 * first, the SQ after it, the doorbell record in the last page), writes WQEs there with the
 * process's own stores, updates the send doorbell record and rings the BlueFlame register of the
 * QP's UAR page (the UAR index read back with {@code QUERY_QP} through mlx5_core, as
 * {@code mlx5_core_qp_query} does). No accessor of the library is used.
 *
 * <p>Each try: a fresh RC QP A (device 0, 32 one-basic-block WQEs) connected to a fresh QP B
 * (device 1); a first lap of 32 RDMA WRITEs posted by the library (so that its wr_id table holds a
 * known id for every ring slot, and as the check that the device is still good after the previous
 * try); then {@code g1} good WRITEs posted by the library (their own doorbell), then in the next
 * slots, written raw: {@code g2} good WRITEs, one fuzzed WQE (bad opcode, DS count 0 or too small,
 * the QPN of another QP, inline data longer than 512 bytes or than its DS count, inline after a
 * data segment, more data segments than a WQE may carry, random bytes, bit flips, random fields,
 * or a valid WQE as control) and up to 3 good WRITEs after it; the doorbell record over all of it
 * (or, now and then, only over the good ones) and one BlueFlame doorbell; or, half of the tries
 * where the fuzzed WQE ends the list and fits the register, that WQE whole as a BlueFlame burst
 * (libmlx5's single post), half of those with random bytes left in its queue slot (the device must
 * run what the burst carried; its {@code wqesBlueFlame} counter says whether it did). Then:
 * <ul>
 * <li>every good WQE before the fuzzed one completes, in order, with SUCCESS (its data at B
 * checked): none is lost (a malformed WQE used to drop the good WQEs fetched before it in the same
 * doorbell);</li>
 * <li>when the model counted the fuzzed WQE as malformed (its {@code bad WQEs} counter, and it
 * must for the mutations that are malformed by the PRM), it completes with LOC_QP_OP_ERR under its
 * own wr_id, each WQE after it with WR_FLUSH_ERR, nothing more; QP A is in ERR ({@code QUERY_QP})
 * and the WQEs after it were not executed (their targets at B untouched);
 * a valid control WQE and a doorbell record short of the fuzzed one leave the QP in RTS with every
 * WQE successful;</li>
 * <li>every wait is bounded; afterwards a QP pair that lives through the whole property does a
 * validated RDMA WRITE, and the next try's first lap is one on fresh QPs.</li>
 * </ul>
 * A second property puts noise on the same path: doorbell records that jump back, far ahead and past
 * the ring, BlueFlame writes naming the QP, another QP of the same UAR or none, BlueFlame bursts of
 * 1 to 32 random words (a control segment naming one of those QPs or random; for the other QP of
 * the same UAR only as a doorbell, since a WQE carried for it is the process writing its own QP), random basic blocks,
 * good posts and polls in between; every wait bounded, the firmware answering {@code QUERY_QP}, the
 * QP destroyed, the other QPs good.
 *
 * <p>After each property: every object destroyed, the drivers unloaded, no DMA page of a driver and
 * no firmware page left, the IOMMU audit clean, every frame free ({@link Mlx5VerbsTest#down}); the
 * fuzz counts what it reached, prints it ({@code target/surefire-reports/*WqeFuzzTest-output.txt})
 * and asserts a minimum variety.
 *
 * <p>Short in CI (the reactor's {@code jqwik.tries}, 500). The long form:
 * <pre>
 * mvn -o -q -pl mlx5-provider -am verify -Dtest=WqeFuzzTest -Dsurefire.failIfNoSpecifiedTests=false -Djqwik.tries=1000000
 * </pre>
 * A failure prints its seed ({@code seed = ...}) and the shrunk sample (in the test report,
 * {@code target/surefire-reports/TEST-*WqeFuzzTest.xml}); {@code @Property(seed = "...")} runs exactly
 * that again (jqwik also reruns the last failing sample first, from {@code target/jqwik-database}).
 */
class WqeFuzzTest extends Mlx5Machine {

    /** Send WQEs of QP A: one basic block each (a WRITE with one data segment), 32 basic blocks. */
    static final int SQ_WQES = 32;
    /** wr_ids: the first lap (its ring slot in the low bits), the library's good posts, the raw ones. */
    static final long LAP = 0x1a90_0000L;
    static final long G1 = 0x6100_0000L;
    /** Bound of every wait for a completion (they come within milliseconds; shrinking a lost one waits this long per try). */
    static final long BOUND_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** Each WQE of a try writes from its own 4 KiB of A's buffer to its own 4 KiB of B's. */
    static final int REGION = 4096;
    static final int REGIONS = 64;
    /** The BlueFlame registers of a UAR page: 0x800 to its end (4 registers of 512 bytes). */
    static final int BF_AREA = 4096 - (int) Qp.UAR_BF_OFFSET;
    static final Pattern BAD_WQES = Pattern.compile("bad WQEs (\\d+)");

    // ------------------------------------------------------------------ what the fuzz reached

    static final Map<String, LongAdder> REACHED = new ConcurrentHashMap<>();
    static final LongAdder TRIES = new LongAdder();
    static final LongAdder NOISE_TRIES = new LongAdder();
    static final LongAdder TRY_NANOS = new LongAdder();

    static void count(String what) {
        REACHED.computeIfAbsent(what, k -> new LongAdder()).increment();
    }

    static long reached(String what) {
        LongAdder a = REACHED.get(what);
        return a == null ? 0 : a.sum();
    }

    static String summary() {
        return String.format("WqeFuzzTest: tries %d (+ %d of doorbell noise), %.1f ms/try; %s", TRIES.sum(), NOISE_TRIES.sum(),
                TRY_NANOS.sum() / 1e6 / Math.max(1, TRIES.sum() + NOISE_TRIES.sum()),
                new TreeMap<>(REACHED).entrySet().stream().map(e -> e.getKey() + "=" + e.getValue().sum()).collect(Collectors.joining(", ")));
    }

    @AfterContainer
    static void report() {
        System.out.println(summary());
    }

    // ------------------------------------------------------------------ the rig (Mlx5VerbsTest's up/down, two IB devices)

    Path tmp;
    IbvContext ctxA;
    IbvContext ctxB;
    IbvPd pdA;
    IbvPd pdB;
    long bufA;
    long bufB;
    IbvMr mrA;
    IbvMr mrB;
    IbvCq cqB;
    /** A pair that lives through the property: the device's other QPs stay usable. */
    IbvCq cqBystander;
    IbvQp bystanderA;
    IbvQp bystanderB;
    int lidA;
    int lidB;

    /**
     * Runs each destroy on its own, so one that fails does not leave the others behind (down()
     * counts leaks); returns the first failure with the later ones suppressed in it, or null.
     */
    static RuntimeException destroyEach(Runnable... destroys) {
        RuntimeException first = null;
        for (Runnable destroy : destroys) {
            try {
                destroy.run();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        return first;
    }

    /** A try of this property failed (shrinking runs more): down() then reports leaks and variety without throwing. */
    boolean failed;
    /** This instance ran the main property (jqwik makes one instance per property): its variety is checked. */
    boolean mainProperty;

    @BeforeProperty
    void up() throws IOException {
        tmp = Files.createTempDirectory("wqefuzz");
        // mlx5_0, mlx5_1: ConnectX-4, InfiniBand
        startMachine(tmp, "wqe-fuzz", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        ctxA = devs.get(0).open(proc);
        ctxB = devs.get(1).open(proc);
        pdA = ctxA.allocPd();
        pdB = ctxB.allocPd();
        bufA = proc.mmap((long) REGION * REGIONS);
        bufB = proc.mmap((long) REGION * REGIONS);
        proc.populate(bufA, (long) REGION * REGIONS, true);
        proc.populate(bufB, (long) REGION * REGIONS, true);
        mrA = pdA.regMr(bufA, (long) REGION * REGIONS, RW);
        mrB = pdB.regMr(bufB, (long) REGION * REGIONS, RW);
        lidA = ctxA.queryPort(1).lid();
        lidB = ctxB.queryPort(1).lid();
        cqB = ctxB.createCq(256, null);
        cqBystander = ctxA.createCq(64, null);
        bystanderA = qp(pdA, cqBystander, 8);
        bystanderB = qp(pdB, cqB, 8);
        connect(bystanderA, bystanderB, lidB, 14, 7, 7);
        connect(bystanderB, bystanderA, lidA, 14, 7, 7);
    }

    @AfterProperty
    void down() throws IOException {
        Throwable first = null;
        try {
            // the device and its other QPs are still good: a fresh pair does a validated RDMA WRITE
            IbvCq cq = ctxA.createCq(64, null);
            IbvQp a = qp(pdA, cq, 8);
            IbvQp b = qp(pdB, cqB, 8);
            connect(a, b, lidB, 14, 7, 7);
            connect(b, a, lidA, 14, 7, 7);
            write(a, cq, REGIONS - 2, 4000, new SplittableRandom(7));
            write(bystanderA, cqBystander, REGIONS - 1, 3000, new SplittableRandom(8));
            a.destroy();
            b.destroy();
            cq.destroy();
            bystanderA.destroy();
            bystanderB.destroy();
            cqBystander.destroy();
            cqB.destroy();
            mrA.dereg();
            mrB.dereg();
            ctxA.close();
            ctxB.close();
        } catch (Throwable t) {
            first = t;
        }
        List<String> leaks = stopMachine();
        Files.deleteIfExists(tmp.resolve("swap"));
        Files.deleteIfExists(tmp);
        System.out.println(summary());
        if (failed) {
            System.out.println("after the property's failure: " + (first != null ? first + ", " : "") + "leaks " + leaks);
            return;
        }
        if (first instanceof Error e) {
            throw e;
        }
        if (first instanceof RuntimeException e) {
            throw e;
        }
        check(leaks.isEmpty(), "no leak after the property: " + leaks);
        if (mainProperty && TRIES.sum() >= 100) { // a smoke run of a few tries proves no variety
            check(reached("malformed") > TRIES.sum() / 3, "most fuzzed WQEs were malformed: " + summary());
            check(reached("executed (not malformed)") > 0, "some fuzzed WQEs executed: " + summary());
            check(reached("good succeeded") > 0 && reached("after malformed flushed") > 0, "good WQEs before a bad one succeeded, those after it flushed: " + summary());
            check(reached("same doorbell: good raw before malformed") > 0, "good WQEs before a malformed one in the same doorbell: " + summary());
            check(reached("by BlueFlame") > 0 && reached("by BlueFlame (queue memory junk)") > 0, "fuzzed WQEs carried by BlueFlame bursts: " + summary());
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    IbvQp qp(IbvPd pd, IbvCq cq, int sendWr) {
        IbvQpInitAttr a = new IbvQpInitAttr();
        a.sendCq = cq;
        a.recvCq = cq;
        a.qpType = IbvQpType.RC;
        a.maxSendWr = sendWr;
        a.maxRecvWr = 2;
        a.maxSendSge = 1;
        a.maxRecvSge = 1;
        a.maxInlineData = 0;
        return pd.createQp(a);
    }

    /** RESET → RTS towards {@code peer}; small timeouts and retry counts make a misbehaving WQE fail fast. */
    static void connect(IbvQp me, IbvQp peer, int peerLid, int timeout, int retries, int rnrRetry) {
        new RcConnect().access(RW).minRnrTimer(1).timeout(timeout, retries).rnrRetry(rnrRetry).connect(me, peerLid, peer.qpNum());
    }

    /** One signaled, validated RDMA WRITE of {@code len} bytes from A's region to B's. */
    void write(IbvQp a, IbvCq cq, int region, int len, SplittableRandom r) {
        byte[] data = pattern(len, r);
        proc.write(bufA + (long) REGION * region, data, 0, len);
        IbvSendWr w = new IbvSendWr().sge(bufA + (long) REGION * region, len, mrA.lkey());
        w.opcode = IbvWrOpcode.RDMA_WRITE;
        w.wrId = 77;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteAddr = bufB + (long) REGION * region;
        w.rkey = mrB.rkey();
        a.postSend(w);
        IbvWc c = poll(cq, "a validated RDMA WRITE");
        check(c.status == IbvWcStatus.SUCCESS && c.wrId == 77, "RDMA WRITE on a good QP: " + c);
        check(Arrays.equals(data, read(bufB + (long) REGION * region, len)), "the WRITE's data at B");
    }

    static byte[] pattern(int len, SplittableRandom r) {
        byte[] b = new byte[len];
        r.nextBytes(b);
        b[0] |= 1; // never all zero: an untouched (cleared) region is told apart
        return b;
    }

    byte[] read(long va, int n) {
        byte[] b = new byte[n];
        proc.read(va, b, 0, n);
        return b;
    }

    static IbvWc poll(IbvCq cq, String what) {
        IbvWc[] wc = { new IbvWc() };
        long deadline = System.nanoTime() + BOUND_NANOS;
        while (true) {
            int k = cq.poll(1, wc);
            check(k >= 0, "CQ in error while waiting for " + what);
            if (k == 1) {
                return wc[0];
            }
            check(System.nanoTime() < deadline, "a completion within 5 s: " + what);
            Thread.onSpinWait();
        }
    }

    static void empty(IbvCq cq) {
        IbvWc[] wc = { new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc() };
        while (cq.poll(wc.length, wc) > 0) {
            // dropped
        }
    }

    /** Completions that come within {@code nanos} (none expected). */
    static List<IbvWc> drain(IbvCq cq, long nanos) {
        List<IbvWc> out = new ArrayList<>();
        IbvWc[] wc = { new IbvWc() };
        long deadline = System.nanoTime() + nanos;
        while (System.nanoTime() < deadline) {
            int k = cq.poll(1, wc);
            if (k == 1) {
                IbvWc c = new IbvWc();
                c.copyFrom(wc[0]);
                out.add(c);
            } else {
                Thread.onSpinWait();
            }
        }
        return out;
    }

    /** The model's count of malformed send WQEs (its tool output, {@code describe()}). */
    long badWqes(int dev) {
        Matcher m = BAD_WQES.matcher(models.get(dev).describe());
        check(m.find(), "describe() names the bad WQEs: " + models.get(dev).describe());
        return Long.parseLong(m.group(1));
    }

    /** {@code QUERY_QP} through mlx5_core: the QPC as the device has it. */

    // ------------------------------------------------------------------ finding the queue the library allocated

    /** The pages of the process's address space, as [start, end) ranges. */
    List<long[]> coverage() {
        List<long[]> out = new ArrayList<>();
        for (Vma v : proc.vmas()) {
            out.add(new long[] { v.start(), v.end() });
        }
        return out;
    }

    /** The one range mapped in {@code after} and not in {@code before}. */
    static long[] added(List<long[]> before, List<long[]> after) {
        List<long[]> fresh = new ArrayList<>();
        for (long[] a : after) {
            long s = a[0];
            while (s < a[1]) {
                long covEnd = coveredUntil(before, s);
                if (covEnd > s) {
                    s = Math.min(covEnd, a[1]);
                    continue;
                }
                long e = Math.min(a[1], nextStart(before, s));
                if (!fresh.isEmpty() && fresh.get(fresh.size() - 1)[1] == s) {
                    fresh.get(fresh.size() - 1)[1] = e;
                } else {
                    fresh.add(new long[] { s, e });
                }
                s = e;
            }
        }
        check(fresh.size() == 1, "ibv_create_qp mapped one buffer in the process: " + fresh.stream().map(Arrays::toString).toList());
        return fresh.get(0);
    }

    private static long coveredUntil(List<long[]> ranges, long at) {
        for (long[] r : ranges) {
            if (r[0] <= at && at < r[1]) {
                return r[1];
            }
        }
        return at;
    }

    private static long nextStart(List<long[]> ranges, long at) {
        long n = Long.MAX_VALUE;
        for (long[] r : ranges) {
            if (r[0] > at) {
                n = Math.min(n, r[0]);
            }
        }
        return n;
    }

    // ------------------------------------------------------------------ the fuzz

    /** What the fuzzed WQE is. The first group is malformed by the PRM and must be refused by the device. */
    enum Mutation {
        BAD_OPCODE(true), DS_ZERO(true), DS_TOO_SMALL(true), WRONG_QPN(true), OTHER_QPN(true), INLINE_TOO_LONG(true), INLINE_PAST_DS(true),
        INLINE_AFTER_DATA(true), TOO_MANY_SEGMENTS(true),
        RANDOM_BYTES(false), RANDOM_BYTES_OWN_QPN(false), BIT_FLIPS(false), RANDOM_FIELDS(false), VALID(false);

        final boolean malformed;

        Mutation(boolean malformed) {
            this.malformed = malformed;
        }
    }

    @Provide
    Arbitrary<Boolean> mostly() {
        return Arbitraries.frequency(Tuple.of(9, true), Tuple.of(1, false));
    }

    /** A send WQE being built: basic blocks of bytes, then written into the ring at its position. */
    static final class Wqe64 {
        final byte[] bytes;
        final MemorySegment s;

        Wqe64(int bbs) {
            bytes = new byte[bbs * Qp.SEND_WQE_BB];
            s = MemorySegment.ofArray(bytes);
        }

        int bbs() {
            return bytes.length / Qp.SEND_WQE_BB;
        }

        void ctrl(int index, int opcode, int qpn, int ds, boolean signaled, int imm) {
            s.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, (index & 0xffff) << 8 | opcode & 0xff);
            s.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | ds & 0x3f);
            s.set(ValueLayout.JAVA_BYTE, Qp.CTRL_FM_CE_SE, (byte) (signaled ? Qp.CTRL_CQ_UPDATE : 0));
            s.set(BE32, Qp.CTRL_IMM, imm);
        }

        void raddr(int seg, long va, int rkey) {
            s.set(BE64, seg * 16L + Qp.RADDR_VA, va);
            s.set(BE32, seg * 16L + Qp.RADDR_RKEY, rkey);
        }

        void data(int seg, int len, int lkey, long addr) {
            s.set(BE32, seg * 16L + Qp.DATA_BYTE_COUNT, len);
            s.set(BE32, seg * 16L + Qp.DATA_LKEY, lkey);
            s.set(BE64, seg * 16L + Qp.DATA_ADDR, addr);
        }
    }

    /** What one good WRITE of the try is: its region, length and data. */
    record Good(int region, int len, byte[] data) {
    }

    Good good(int region, SplittableRandom r) {
        int len = 1 + r.nextInt(REGION);
        byte[] data = pattern(len, r);
        proc.write(bufA + (long) REGION * region, data, 0, len);
        proc.write(bufB + (long) REGION * region, new byte[REGION], 0, REGION); // cleared: untouched unless written
        return new Good(region, len, data);
    }

    /** The library's format of a signaled one-block RDMA WRITE (ctrl, remote address, one data segment). */
    Wqe64 goodWqe(int index, int qpn, Good g) {
        Wqe64 w = new Wqe64(1);
        w.ctrl(index, Wqe.OP_RDMA_WRITE, qpn, 3, true, 0);
        w.raddr(1, bufB + (long) REGION * g.region(), mrB.rkey());
        w.data(2, g.len(), mrA.lkey(), bufA + (long) REGION * g.region());
        return w;
    }

    /** The fuzzed WQE at basic block {@code index}. */
    /** A SEND of {@code ds} segments whose inline segment claims {@code len} bytes, filled with random bytes whatever the claim. */
    static Wqe64 inlineSend(int index, int qpn, int ds, int len, SplittableRandom r) {
        Wqe64 w = new Wqe64((ds * 16 + 63) / 64);
        w.ctrl(index, Wqe.OP_SEND, qpn, ds, true, 0);
        w.s.set(BE32, 16, Qp.INLINE_SEG | len);
        for (int i = 20; i < w.bytes.length; i++) {
            w.bytes[i] = (byte) r.nextInt();
        }
        return w;
    }

    Wqe64 fuzzed(Mutation m, int index, int qpn, Good g, SplittableRandom r) {
        switch (m) {
            case BAD_OPCODE -> {
                Wqe64 w = goodWqe(index, qpn, g);
                int op;
                do {
                    op = r.nextInt(256);
                } while (Wqe.valid(op));
                w.s.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, (index & 0xffff) << 8 | op);
                return w;
            }
            case DS_ZERO -> {
                Wqe64 w = goodWqe(index, qpn, g);
                w.s.set(BE32, Qp.CTRL_QPN_DS, qpn << 8);
                return w;
            }
            case DS_TOO_SMALL -> { // a WRITE without its remote address segment, or an atomic without its atomic segment
                Wqe64 w = goodWqe(index, qpn, g);
                boolean atomic = r.nextBoolean();
                w.ctrl(index, atomic ? (r.nextBoolean() ? Wqe.OP_ATOMIC_CS : Wqe.OP_ATOMIC_FA) : Wqe.OP_RDMA_WRITE, qpn, atomic ? 2 : 1, true, 0);
                return w;
            }
            case WRONG_QPN -> {
                Wqe64 w = goodWqe(index, qpn, g);
                int other;
                do {
                    other = r.nextInt(1 << 24);
                } while (other == qpn);
                w.s.set(BE32, Qp.CTRL_QPN_DS, other << 8 | 3);
                return w;
            }
            case OTHER_QPN -> { // a QP of the same device (the bystander) or the peer's number
                Wqe64 w = goodWqe(index, qpn, g);
                int other = r.nextBoolean() ? bystanderA.qpNum() : bystanderB.qpNum();
                w.s.set(BE32, Qp.CTRL_QPN_DS, other << 8 | 3);
                return w;
            }
            case INLINE_TOO_LONG -> { // a SEND with 513..1023 bytes of inline data (the device carries 512)
                int len = 513 + r.nextInt(511);
                int ds = Math.min(63, 1 + (4 + len + 15) / 16);
                return inlineSend(index, qpn, ds, len, r);
            }
            case INLINE_PAST_DS -> { // a SEND whose inline data needs more segments than its DS count gives
                int len = 13 + r.nextInt(388);
                int need = (4 + len + 15) / 16;
                int ds = 1 + 1 + r.nextInt(need - 1);
                return inlineSend(index, qpn, ds, len, r);
            }
            case INLINE_AFTER_DATA -> {
                Wqe64 w = new Wqe64(2);
                w.ctrl(index, Wqe.OP_RDMA_WRITE, qpn, 5, true, 0);
                w.raddr(1, bufB + (long) REGION * g.region(), mrB.rkey());
                w.data(2, g.len(), mrA.lkey(), bufA + (long) REGION * g.region());
                w.s.set(BE32, 3 * 16L, Qp.INLINE_SEG | 8);
                return w;
            }
            case TOO_MANY_SEGMENTS -> { // a SEND with 33..62 data segments: the device takes 32
                int n = 33 + r.nextInt(30);
                int ds = 1 + n;
                Wqe64 w = new Wqe64((ds * 16 + 63) / 64);
                w.ctrl(index, Wqe.OP_SEND, qpn, ds, true, 0);
                for (int i = 0; i < n; i++) {
                    w.data(1 + i, 1, mrA.lkey(), bufA + (long) REGION * g.region());
                }
                return w;
            }
            case RANDOM_BYTES, RANDOM_BYTES_OWN_QPN -> {
                Wqe64 w = new Wqe64(1 + r.nextInt(4));
                r.nextBytes(w.bytes);
                if (m == Mutation.RANDOM_BYTES_OWN_QPN) {
                    w.s.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | 1 + r.nextInt(w.bbs() * 4));
                    if (r.nextBoolean()) {
                        int op = new int[] { Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM, Wqe.OP_SEND, Wqe.OP_SEND_IMM, Wqe.OP_RDMA_READ,
                                Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA }[r.nextInt(7)];
                        w.s.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, (index & 0xffff) << 8 | op);
                    }
                }
                return w;
            }
            case BIT_FLIPS -> {
                // anywhere but the remote address and key (bytes 16..27): a WRITE that still runs must not land on
                // the target of a good WQE of the try, whose data is checked (it may run longer, into later regions)
                Wqe64 w = goodWqe(index, qpn, g);
                int n = 1 + r.nextInt(4);
                for (int i = 0; i < n; i++) {
                    int bit;
                    do {
                        bit = r.nextInt(64 * 8);
                    } while (bit / 8 >= 16 && bit / 8 < 28);
                    w.bytes[bit / 8] ^= (byte) (1 << bit % 8);
                }
                return w;
            }
            case RANDOM_FIELDS -> { // well formed, with random opcode, flags, keys, addresses and lengths
                int op = new int[] { Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM, Wqe.OP_SEND, Wqe.OP_SEND_IMM, Wqe.OP_RDMA_READ,
                        Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA }[r.nextInt(7)];
                boolean raddr = op != Wqe.OP_SEND && op != Wqe.OP_SEND_IMM;
                boolean atomic = Wqe.isAtomic(op);
                int ds = 1 + (raddr ? 1 : 0) + (atomic ? 1 : 0) + 1;
                Wqe64 w = new Wqe64((ds * 16 + 63) / 64);
                w.ctrl(index, op, qpn, ds, r.nextBoolean(), r.nextInt());
                w.s.set(ValueLayout.JAVA_BYTE, Qp.CTRL_FM_CE_SE, (byte) r.nextInt());
                int seg = 1;
                if (raddr) {
                    // within B's buffer only where no good WQE of the try writes (regions 48..61), or anywhere
                    w.raddr(seg++, r.nextBoolean() ? bufB + (long) REGION * 48 + r.nextInt(REGION * 14) : r.nextLong(),
                            r.nextBoolean() ? mrB.rkey() : r.nextInt());
                }
                if (atomic) {
                    w.s.set(BE64, seg * 16L, r.nextLong());
                    w.s.set(BE64, seg * 16L + 8, r.nextLong());
                    seg++;
                }
                w.data(seg, r.nextBoolean() ? 1 + r.nextInt(REGION) : r.nextInt(), r.nextBoolean() ? mrA.lkey() : r.nextInt(),
                        r.nextBoolean() ? bufA + (long) REGION * g.region() : r.nextLong());
                return w;
            }
            default -> { // VALID: a good WRITE like the others
                return goodWqe(index, qpn, g);
            }
        }
    }

    /**
     * Good WQEs before a fuzzed one, fetched by earlier doorbells and by the same one, are never
     * lost; a malformed WQE completes with LOC_QP_OP_ERR, moves the QP to ERR, and the ones after it flush unexecuted; the device goes on.
     */
    @Property
    void aFuzzedWqeNeverLosesTheGoodOnesBeforeItNorHangsTheDevice(@ForAll @IntRange(min = 0, max = 3) int g1,
            @ForAll @IntRange(min = 0, max = 4) int g2, @ForAll Mutation mutation, @ForAll @IntRange(min = 0, max = 3) int after,
            @ForAll("mostly") boolean doorbellCoversIt, @ForAll long seed) {
        long t0 = System.nanoTime();
        TRIES.increment();
        mainProperty = true;
        SplittableRandom r = new SplittableRandom(seed);
        IbvCq cqA = ctxA.createCq(128, null);
        List<long[]> before = coverage();
        IbvQp a = qp(pdA, cqA, SQ_WQES);
        long[] range = added(before, coverage());
        IbvQp b = qp(pdB, cqB, 4);
        try {
            run(a, b, cqA, range, g1, g2, mutation, after, doorbellCoversIt, r);
        } catch (Throwable t) {
            failed = true; // the property's own failure is the report: down() does not cover it with its own
            throw t;
        } finally {
            RuntimeException cleanup = destroyEach(a::destroy, b::destroy, cqA::destroy, () -> empty(cqB));
            TRY_NANOS.add(System.nanoTime() - t0);
            if (cleanup != null && !failed) {
                failed = true;
                throw cleanup;
            }
        }
        // the device and its other QPs stay usable
        write(bystanderA, cqBystander, REGIONS - 1, 1 + r.nextInt(REGION), r);
    }

    void run(IbvQp a, IbvQp b, IbvCq cqA, long[] range, int g1, int g2, Mutation mutation, int after, boolean doorbellCoversIt,
            SplittableRandom r) {
        int qpn = a.qpNum();
        // the layout mlx5_ib gave the buffer: RQ (2 WQEs of 32 bytes), then the SQ, then the doorbell record page
        int[] geo = Mlx5Qp.geometry(IbvQpType.RC, SQ_WQES, 1, 0, 2, 1);
        check(geo[0] == 5, "32 one-block send WQEs: log_sq_size 5, not " + geo[0]);
        long rqBytes = (1L << geo[1]) * (16L << geo[2]);
        long queueBytes = (rqBytes + ((long) Qp.SEND_WQE_BB << geo[0]) + 4095) & ~4095L;
        check(range[1] - range[0] == queueBytes + 4096, "the QP's buffer is the queue and the doorbell page: " + (range[1] - range[0]));
        long sq = range[0] + rqBytes;
        long dbr = range[0] + queueBytes;
        int uar = Qp.QPC_UAR_PAGE.get(queryQp(0, qpn), Qp.QUERY_OUT_QPC);
        connect(a, b, lidB, 8, 1, 1); // 1 ms ACK timeout, one retry, one RNR retry: a misdirected WQE fails fast
        connect(b, a, lidA, 8, 1, 1);

        // the first lap, posted by the library: its wr_id table gets LAP | slot for every slot
        Good[] lap = new Good[SQ_WQES];
        IbvSendWr chain = null;
        for (int i = SQ_WQES - 1; i >= 0; i--) {
            lap[i] = good(i, r);
            IbvSendWr w = new IbvSendWr().sge(bufA + (long) REGION * i, lap[i].len(), mrA.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.wrId = LAP | i;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = bufB + (long) REGION * i;
            w.rkey = mrB.rkey();
            w.next = chain;
            chain = w;
        }
        a.postSend(chain);
        for (int i = 0; i < SQ_WQES; i++) {
            IbvWc c = poll(cqA, "the first lap's WRITE " + i);
            check(c.status == IbvWcStatus.SUCCESS && c.wrId == (LAP | i), "the first lap in order and successful: " + c);
        }
        for (int i = 0; i < SQ_WQES; i++) {
            check(Arrays.equals(lap[i].data(), read(bufB + (long) REGION * i, lap[i].len())), "the first lap's data at B, WRITE " + i);
        }
        int region = SQ_WQES;

        // g1 good WRITEs by the library, on their own doorbell(s)
        List<Long> expectedIds = new ArrayList<>();
        List<Good> expectedGoods = new ArrayList<>();
        boolean oneChain = r.nextBoolean();
        IbvSendWr first = null;
        IbvSendWr last = null;
        for (int j = 0; j < g1; j++) {
            Good g = good(region++, r);
            IbvSendWr w = new IbvSendWr().sge(bufA + (long) REGION * g.region(), g.len(), mrA.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.wrId = G1 | j;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = bufB + (long) REGION * g.region();
            w.rkey = mrB.rkey();
            expectedIds.add(w.wrId);
            expectedGoods.add(g);
            if (!oneChain) {
                a.postSend(w);
            } else if (first == null) {
                first = w;
                last = w;
            } else {
                last.next = w;
                last = w;
            }
        }
        if (first != null) {
            a.postSend(first);
        }

        // raw: g2 good WRITEs, the fuzzed WQE, `after` good WRITEs; one doorbell record, one BlueFlame write
        int pos = SQ_WQES + g1; // the next basic block (the library's counter)
        List<Wqe64> raw = new ArrayList<>();
        for (int j = 0; j < g2; j++) {
            Good g = good(region++, r);
            raw.add(goodWqe(pos + raw.size(), qpn, g));
            expectedIds.add(LAP | (pos + j) % SQ_WQES);
            expectedGoods.add(g);
        }
        int fuzzedAt = pos + raw.size();
        Good fuzzTarget = good(region++, r);
        Wqe64 fz = fuzzed(mutation, fuzzedAt, qpn, fuzzTarget, r);
        // the device steps over a WQE by its DS count: the fuzzed WQE gets exactly the blocks its DS count
        // spans (random bytes past what the mutation wrote), so that the next WQE is where the device looks
        int fzDs = fz.s.get(BE32, Qp.CTRL_QPN_DS) & 0x3f;
        int fzSpan = Math.max(1, (fzDs * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB);
        if (fz.bbs() != fzSpan) {
            Wqe64 sized = new Wqe64(fzSpan);
            r.nextBytes(sized.bytes);
            System.arraycopy(fz.bytes, 0, sized.bytes, 0, Math.min(fz.bytes.length, sized.bytes.length));
            fz = sized;
        }
        List<Good> afterGoods = new ArrayList<>();
        for (int j = 0; j < raw.size(); j++) {
            writeBbs(sq, pos + j, raw.get(j));
        }
        // now and then the fuzzed WQE goes whole as a BlueFlame burst, as libmlx5 sends a single post
        // that fits the register (≤ 4 blocks): the burst's WQE index and DS count stand for the
        // doorbell record. Only a burst naming its own slot and ending the list is taken as the WQE
        // (the raw good ones before it are fetched from memory up to it; a DS count of 0 gives no size,
        // so such a burst is a plain doorbell, tested by the noise property); half of those leave random
        // bytes in the slot's memory, so a device that read the queue instead of the burst fails.
        int fzIdx = fz.s.get(BE32, Qp.CTRL_OPMOD_IDX_OPCODE) >>> 8 & 0xffff;
        boolean ownQp = fz.s.get(BE32, Qp.CTRL_QPN_DS) >>> 8 == qpn; // a burst naming another QP rings that one, or none (the noise property)
        boolean byBurst = doorbellCoversIt && after == 0 && ownQp && fzDs > 0 && fzSpan <= 4 && fzIdx == (fuzzedAt & 0xffff) && r.nextBoolean();
        boolean burstOnly = byBurst && r.nextBoolean();
        if (burstOnly) {
            Wqe64 junk = new Wqe64(fzSpan);
            r.nextBytes(junk.bytes);
            writeBbs(sq, fuzzedAt, junk);
        } else {
            writeBbs(sq, fuzzedAt, fz);
        }
        int next = fuzzedAt + fzSpan;
        for (int j = 0; j < after; j++) {
            Good g = good(region++, r);
            afterGoods.add(g);
            writeBbs(sq, next + j, goodWqe(next + j, qpn, g));
        }
        // the device reads the WQE by its DS count, up to fzSpan blocks: the blocks past what was written hold the first lap's WQEs
        int end = next + after;
        check(end - SQ_WQES <= SQ_WQES, "the raw WQEs fit the ring");
        int target = doorbellCoversIt ? end : fuzzedAt;
        long badBefore = badWqes(0);
        long bfBefore = models.get(0).wqesBlueFlame();
        // the send doorbell record, then the BlueFlame register of the QP's UAR: the first 8 bytes of a
        // control segment (a doorbell), or the whole fuzzed WQE (a burst)
        proc.write(dbr + Qp.DBR_SND, be32(target & 0xffff), 0, 4);
        long bfRegister = ((long) uar << 12) + Qp.UAR_BF_OFFSET + (r.nextBoolean() ? 0 : 256);
        if (byBurst) {
            fns.get(0).iowrite64Copy(0, bfRegister, fz.s, 0, fzSpan * Qp.SEND_WQE_BB);
            count(burstOnly ? "by BlueFlame (queue memory junk)" : "by BlueFlame");
        } else {
            MemorySegment ctrl = MemorySegment.ofArray(new byte[8]);
            ctrl.set(BE32, 0, (pos & 0xffff) << 8 | Wqe.OP_RDMA_WRITE);
            ctrl.set(BE32, 4, qpn << 8 | 3);
            fns.get(0).write64(0, bfRegister, ctrl.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
        }
        long bad = badWqes(0) - badBefore;
        check(models.get(0).wqesBlueFlame() - bfBefore == (byBurst ? 1 : 0), "the device took the fuzzed WQE from the burst iff one carried it: "
                + (models.get(0).wqesBlueFlame() - bfBefore) + " (" + mutation + ")");
        if (g2 > 0 && bad > 0) {
            count("same doorbell: good raw before malformed");
        }
        count(mutation.name() + (doorbellCoversIt ? "" : " (record short of it)"));

        // every good one before the fuzzed WQE: one completion each, in order, SUCCESS (a malformed WQE
        // fails when the engine reaches it, not when the device fetches it)
        for (int i = 0; i < expectedIds.size(); i++) {
            IbvWc c = poll(cqA, "good WQE " + i + " of " + expectedIds.size() + " before a " + mutation + " (" + (bad > 0 ? "malformed" : "not malformed")
                    + "): a lost completion");
            check(c.wrId == expectedIds.get(i), String.format("completions in order: wr_id 0x%x, expected 0x%x (%s, %s)", c.wrId, expectedIds.get(i),
                    c, mutation));
            check(c.status == IbvWcStatus.SUCCESS, "a good WQE before the fuzzed one succeeds, not " + c + " (" + mutation + ")");
            Good g = expectedGoods.get(i);
            check(Arrays.equals(g.data(), read(bufB + (long) REGION * g.region(), g.len())), "a successful WRITE's data at B: " + c);
            count("good succeeded");
        }
        if (!doorbellCoversIt) {
            check(bad == 0, "nothing past the doorbell record is fetched");
            check(drain(cqA, TimeUnit.MILLISECONDS.toNanos(2)).isEmpty(), "no completion past the doorbell record");
            check(qpState(qpn) == Qp.STATE_RTS, "the QP is still in RTS");
            untouched(fuzzTarget, afterGoods, mutation);
            count("record short of the fuzzed WQE");
            return;
        }
        if (mutation.malformed) {
            check(bad == 1, "a " + mutation + " WQE is malformed and the device counts it: " + bad + " (" + models.get(0).describe() + ")");
        }
        if (mutation == Mutation.VALID) {
            check(bad == 0, "a valid WQE is not counted as malformed");
        }
        if (bad > 0) {
            count("malformed");
            check(bad == 1, "one malformed WQE counted once: " + bad);
            // the malformed WQE's own completion, LOCAL_QP_OP_ERR with its wr_id (the library's table by wqe_counter),
            // then one WR_FLUSH_ERR for each WQE after it (the device steps over the malformed one by its DS count)
            IbvWc c = poll(cqA, "the malformed WQE's error completion (" + mutation + ")");
            check(c.status == IbvWcStatus.LOC_QP_OP_ERR && c.wrId == (LAP | fuzzedAt % SQ_WQES),
                    String.format("a malformed WQE completes with LOC_QP_OP_ERR and its wr_id 0x%x: %s (%s)", LAP | fuzzedAt % SQ_WQES, c, mutation));
            for (int j = 0; j < after; j++) {
                IbvWc f = poll(cqA, "WQE " + j + " after the malformed one: flushed");
                check(f.status == IbvWcStatus.WR_FLUSH_ERR && f.wrId == (LAP | (next + j) % SQ_WQES),
                        "a WQE after a malformed one flushes, in order: " + f + " (" + mutation + ")");
                count("after malformed flushed");
            }
            check(qpState(qpn) == Qp.STATE_ERR, "a QP that fetched a malformed WQE is in ERR: state " + qpState(qpn));
            List<IbvWc> extra = drain(cqA, TimeUnit.MILLISECONDS.toNanos(2));
            check(extra.isEmpty(), "one completion for the malformed WQE and one for each after it, no more: " + extra);
            untouched(fuzzTarget, afterGoods, mutation);
        } else {
            count("executed (not malformed)");
            if (mutation == Mutation.VALID) {
                // the control: the fuzzed slot holds a good WRITE; it and those after it succeed, the QP stays in RTS
                for (int i = 0; i <= after; i++) {
                    IbvWc c = poll(cqA, "the valid WQE and those after it");
                    long want = LAP | (fuzzedAt + i) % SQ_WQES;
                    if (i > 0) {
                        want = LAP | (next + i - 1) % SQ_WQES;
                    }
                    check(c.status == IbvWcStatus.SUCCESS && c.wrId == want, "valid WQEs all succeed, in order: " + c + " (wanted wr_id 0x"
                            + Long.toHexString(want) + ")");
                }
                Good g = fuzzTarget;
                check(Arrays.equals(g.data(), read(bufB + (long) REGION * g.region(), g.len())), "the valid WQE's data at B");
                check(qpState(qpn) == Qp.STATE_RTS, "the QP is still in RTS after valid WQEs");
            }
            // else: executed with whatever it says; its completions (if any) and the QP's state are its business
        }
    }

    @Provide
    Arbitrary<List<Long>> noise() {
        return Arbitraries.longs().list().ofMinSize(1).ofMaxSize(12);
    }

    /**
     * Noise on the send doorbell path of a QP the library also posts on: doorbell records that jump
     * (back, far ahead, past the ring), BlueFlame writes naming the QP, another QP of the same UAR or
     * no QP, BlueFlame bursts of random words (naming the other QP of the same UAR only as doorbells),
     * random basic blocks in the ring, good posts and CQ polls in between. Whatever the
     * device fetches and runs, every wait is bounded, the firmware still answers {@code QUERY_QP},
     * the QP is destroyed, and the device's other QPs stay good.
     */
    @Property
    void doorbellRecordAndBlueFlameNoiseNeverHangTheDevice(@ForAll("noise") List<Long> actions) {
        long t0 = System.nanoTime();
        NOISE_TRIES.increment();
        IbvCq cqA = ctxA.createCq(128, null);
        List<long[]> before = coverage();
        IbvQp a = qp(pdA, cqA, SQ_WQES);
        long[] range = added(before, coverage());
        IbvQp b = qp(pdB, cqB, 4);
        try {
            noise(a, b, cqA, range, actions);
        } catch (Throwable t) {
            failed = true;
            throw t;
        } finally {
            RuntimeException cleanup = destroyEach(a::destroy, b::destroy, cqA::destroy, () -> empty(cqB));
            TRY_NANOS.add(System.nanoTime() - t0);
            if (cleanup != null && !failed) {
                failed = true;
                throw cleanup;
            }
        }
        write(bystanderA, cqBystander, REGIONS - 1, 1 + (int) (actions.get(0) & 0xfff), new SplittableRandom(actions.get(0)));
    }

    void noise(IbvQp a, IbvQp b, IbvCq cqA, long[] range, List<Long> actions) {
        int qpn = a.qpNum();
        int[] geo = Mlx5Qp.geometry(IbvQpType.RC, SQ_WQES, 1, 0, 2, 1);
        long rqBytes = (1L << geo[1]) * (16L << geo[2]);
        long queueBytes = (rqBytes + ((long) Qp.SEND_WQE_BB << geo[0]) + 4095) & ~4095L;
        long sq = range[0] + rqBytes;
        long dbr = range[0] + queueBytes;
        int uar = Qp.QPC_UAR_PAGE.get(queryQp(0, qpn), Qp.QUERY_OUT_QPC);
        connect(a, b, lidB, 8, 1, 1);
        connect(b, a, lidA, 8, 1, 1);
        int posted = 0;
        IbvWc[] wc = new IbvWc[16];
        for (int i = 0; i < wc.length; i++) {
            wc[i] = new IbvWc();
        }
        for (long action : actions) {
            SplittableRandom r = new SplittableRandom(action);
            int kind = r.nextInt(9);
            count("noise " + kind);
            switch (kind) {
                case 0 -> proc.write(dbr + Qp.DBR_SND, be32(r.nextInt(1 << 16)), 0, 4);
                case 1 -> proc.write(dbr + Qp.DBR_SND, be32(posted + r.nextInt(70) & 0xffff), 0, 4);
                case 2 -> {
                    Wqe64 w = new Wqe64(1);
                    r.nextBytes(w.bytes);
                    if (r.nextBoolean()) {
                        w.s.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | 1 + r.nextInt(12));
                    }
                    if (r.nextBoolean()) {
                        w = goodWqe(r.nextInt(1 << 16), qpn, good(SQ_WQES + r.nextInt(8), r));
                    }
                    writeBbs(sq, r.nextInt(SQ_WQES), w);
                }
                case 3, 4, 5 -> {
                    int n = kind == 3 ? qpn : kind == 4 ? bystanderA.qpNum() : r.nextInt(1 << 24);
                    MemorySegment ctrl = MemorySegment.ofArray(new byte[8]);
                    ctrl.set(BE32, 4, n << 8 | 3);
                    fns.get(0).write64(0, ((long) uar << 12) + Qp.UAR_BF_OFFSET + 64L * r.nextInt(32), ctrl.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
                }
                case 6 -> {
                    Good g = good(SQ_WQES + 8 + r.nextInt(8), r);
                    IbvSendWr w = new IbvSendWr().sge(bufA + (long) REGION * g.region(), g.len(), mrA.lkey());
                    w.opcode = IbvWrOpcode.RDMA_WRITE;
                    w.wrId = posted;
                    w.sendFlags = IbvSendWr.SEND_SIGNALED;
                    w.remoteAddr = bufB + (long) REGION * g.region();
                    w.rkey = mrB.rkey();
                    try {
                        a.postSend(w);
                        posted++;
                    } catch (org.peerdirect.ib.core.verbs.PostException e) {
                        count("post refused by the library"); // its ring accounting is the noise's victim too
                    }
                }
                case 8 -> {
                    // a BlueFlame burst: 1..32 random words at a random 8-byte place of the register, its
                    // control segment naming this QP, the bystander or any QPN, its WQE index near what
                    // was posted or anywhere (a burst never crosses the register's 4 KiB page). One naming
                    // the bystander has DS 0, so it is only a doorbell for it: a burst carrying a WQE for
                    // another QP of the same UAR is this process writing into its own QP (the device
                    // executes it and the library's ring no longer matches the device's counter, as on
                    // hardware), which no device could keep that QP good through; the long form found it
                    int words = 1 + r.nextInt(32);
                    MemorySegment burst = MemorySegment.ofArray(new byte[words * 8]);
                    for (int w = 0; w < words; w++) {
                        burst.set(ValueLayout.JAVA_LONG_UNALIGNED, w * 8L, r.nextLong());
                    }
                    if (words >= 2 && r.nextInt(3) != 0) {
                        boolean bystander = false;
                        int n = r.nextBoolean() ? qpn : (bystander = r.nextBoolean()) ? bystanderA.qpNum() : r.nextInt(1 << 24);
                        int idx = r.nextBoolean() ? posted + r.nextInt(-4, 40) & 0xffff : r.nextInt(1 << 16);
                        burst.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, idx << 8 | (r.nextBoolean() ? Wqe.OP_RDMA_WRITE : r.nextInt(256)));
                        burst.set(BE32, Qp.CTRL_QPN_DS, n << 8 | (bystander ? 0 : r.nextInt(64)));
                    }
                    int at = 8 * r.nextInt((BF_AREA - words * 8) / 8 + 1);
                    fns.get(0).iowrite64Copy(0, ((long) uar << 12) + Qp.UAR_BF_OFFSET + at, burst, 0, words * 8);
                }
                default -> {
                    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1 + r.nextInt(3));
                    while (System.nanoTime() < deadline) {
                        if (cqA.poll(wc.length, wc) < 0) {
                            count("CQ overrun");
                            break;
                        }
                    }
                }
            }
            if (cqA.poll(wc.length, wc) < 0) {
                count("CQ overrun");
            }
        }
        // the firmware still answers; what the QP is in is the noise's business
        int st = qpState(qpn);
        count("ended in state " + st);
        drain(cqA, TimeUnit.MILLISECONDS.toNanos(1));
    }

    int qpState(int qpn) {
        return Qp.QPC_STATE.get(queryQp(0, qpn), Qp.QUERY_OUT_QPC);
    }

    /** Nothing at or after the fuzzed WQE ran: the targets of the WRITEs after it are as cleared. */
    void untouched(Good fuzzTarget, List<Good> afterGoods, Mutation m) {
        for (Good g : afterGoods) {
            check(Arrays.equals(new byte[g.len()], read(bufB + (long) REGION * g.region(), g.len())),
                    "a WQE after a malformed one (or past the doorbell record) did not run: its target at B is untouched (" + m + ")");
        }
        check(Arrays.equals(new byte[fuzzTarget.len()], read(bufB + (long) REGION * fuzzTarget.region(), fuzzTarget.len())),
                "the malformed WQE (or one past the doorbell record) did not write (" + m + ")");
    }

    void writeBbs(long sq, int index, Wqe64 w) {
        for (int i = 0; i < w.bbs(); i++) {
            long at = sq + (long) ((index + i) % SQ_WQES) * Qp.SEND_WQE_BB;
            proc.write(at, w.bytes, i * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
        }
    }

    static byte[] be32(int v) {
        return new byte[] { (byte) (v >>> 24), (byte) (v >>> 16), (byte) (v >>> 8), (byte) v };
    }
}
