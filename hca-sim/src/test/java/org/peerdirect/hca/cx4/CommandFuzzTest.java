package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Collectors;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.AfterProperty;
import net.jqwik.api.lifecycle.BeforeContainer;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.CmdMailbox;
import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Vport;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * Fuzzes the ConnectX-4 command interface from the driver's side only, as {@link CommandQueueTest}
 * drives it: command entries in a queue page mapped through the function's IOMMU domain, mailbox
 * chains in mapped pages, the doorbell on BAR0, the ownership bit polled.
 *
 * <p>Every try powers a fresh device up on a fresh bus and memory (about 8 ms with its close: a
 * device shared by the tries would make a failing sample depend on the tries before it, and
 * shrinking useless), brings it to a random level (DISABLED; ENABLED; INITIALIZED; with a UAR, a PD
 * and an EQ; with a CQ, a QP and an mkey; with a page-request EQ the harness serves as mlx5_core's
 * page handler does, lazily), then throws a sequence of commands at it: malformed entries and
 * mailbox chains (bad type, lengths 0, tiny, huge and negative, misaligned pointers, chains with
 * loops, wrong block numbers, wrong tokens, next pointers outside every IOMMU mapping or into the
 * queue page, random blocks and signatures, raw random entries), unknown opcodes and op_mods,
 * valid-looking commands with random fields in random orders, floods of creating commands (limits,
 * context space exhausted, commands parked for pages), pages unmapped under the firmware, several
 * entries on one doorbell, and noise on the doorbell register, the queue address and the UAR pages
 * (EQ, CQ and BlueFlame doorbells, the last over random send queues). For every command:
 * <ul>
 * <li>the entry comes back to software within a bound (a command parked for firmware pages is
 * answered with pages; when no page request reached the harness, because an EQ of the fuzz took
 * it, the harness gives pages after 200 ms and counts it);</li>
 * <li>its delivery status is one the PRM defines and equals what an independent walk of the entry
 * and the chains in memory predicts (the order of the checks included); a delivered command carries
 * a known command status, and a nonzero status a nonzero syndrome (zero for OK); an unknown opcode
 * is BAD_OP with the model's unknown-opcode syndrome;</li>
 * <li>a NOP right after succeeds, the firmware thread is alive and died of nothing.</li>
 * </ul>
 * At the end of every try the device is closed, every page unmapped and freed, and the IOMMU audit
 * must show no violation (DMA to unmapped addresses is expected and only counted as faults), no
 * mapping left and every frame free. Each property counts what it reached ((opcode, status,
 * syndrome) → count, delivery status → count), prints a summary line to the test's output
 * ({@code target/surefire-reports/*CommandFuzzTest-output.txt}) and asserts a minimum variety, so
 * a generator that stopped reaching the device fails.
 *
 * <p>Signatures: the model reports {@code cmdif_checksum} 0 as its maximum, so {@code SET_HCA_CAP}
 * cannot turn checking on, and {@link CommandQueue} never checks a signature: random signature bytes
 * are fuzzed, a signature error is never expected.
 *
 * <p>{@link #aPageRequestLostOnAFullEqIsRaisedAgainAndTheParkedCommandComesBack} is a defect the fuzz reached
 * (a page request lost on a full EQ left the command parked for it waiting forever), kept as an
 * example since the model raises a lost request again.
 *
 * <p>Short in CI (the reactor's {@code jqwik.tries}, 500). The long form:
 * <pre>
 * mvn -o -q -pl hca-sim -am verify -Dtest=CommandFuzzTest -Dsurefire.failIfNoSpecifiedTests=false -Djqwik.tries=1000000
 * </pre>
 * A failure prints its seed ({@code seed = ...}) and the shrunk sample (in the test report,
 * {@code target/surefire-reports/TEST-*CommandFuzzTest.xml}); put the seed into the property's
 * {@code @Property(seed = "...")} to run exactly that sequence again (jqwik also reruns the last
 * failing sample first, from {@code target/jqwik-database}).
 */
class CommandFuzzTest {

    /** Bound for one command (huge mailbox chains take milliseconds, nothing takes seconds). */
    static final long COMMAND_BOUND_NANOS = TimeUnit.SECONDS.toNanos(10);
    /** After this, a command still owned by hardware is taken for parked and the harness gives pages. */
    static final long PARK_SUSPECT_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** The harness answers page requests while waiting for a command only after this. */
    static final long LAZY_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** No IOVA of a 16 MiB machine reaches this: DMA there is an IOMMU fault. */
    static final long UNMAPPED = 0x7_0000_0000L;
    /** Mailbox blocks a chain is built with at most (1 MiB of command: 2048 blocks). */
    static final int MAX_BUILD = 2100;
    /** The harness's own slots: 1 for NOP and bring-up, 2 for pages given to a parked command. */
    static final int SLOT_HARNESS = 1;
    static final int SLOT_GIVE = 2;

    static final Set<Integer> DELIVERY_STATUSES = Set.of(CmdEntry.DELIVERY_OK, CmdEntry.DELIVERY_SIGNATURE_ERR, CmdEntry.DELIVERY_TOKEN_ERR,
            CmdEntry.DELIVERY_BAD_BLOCK_NUMBER, CmdEntry.DELIVERY_OUT_PTR_ALIGN_ERR, CmdEntry.DELIVERY_IN_PTR_ALIGN_ERR,
            CmdEntry.DELIVERY_FW_INTERNAL_ERR, CmdEntry.DELIVERY_IN_LENGTH_ERR, CmdEntry.DELIVERY_OUT_LENGTH_ERR,
            CmdEntry.DELIVERY_RES_FLD_NOT_CLR_ERR, CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR);
    static final Set<Integer> COMMAND_STATUSES = Set.of(Mlx5Cmd.STAT_OK, Mlx5Cmd.STAT_INT_ERR, Mlx5Cmd.STAT_BAD_OP_ERR, Mlx5Cmd.STAT_BAD_PARAM_ERR,
            Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, Mlx5Cmd.STAT_BAD_RES_ERR, Mlx5Cmd.STAT_RES_BUSY, Mlx5Cmd.STAT_NOT_READY, Mlx5Cmd.STAT_LIM_ERR,
            Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Mlx5Cmd.STAT_IX_ERR, Mlx5Cmd.STAT_NO_RES_ERR, Mlx5Cmd.STAT_BAD_QP_STATE_ERR,
            Mlx5Cmd.STAT_BAD_PKT_ERR, Mlx5Cmd.STAT_BAD_SIZE_OUTS_CQES_ERR, Mlx5Cmd.STAT_BAD_INP_LEN_ERR, Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR);
    /** The opcodes the model executes (anything the interface does not even name must be BAD_OP). */
    static final int[] KNOWN = { Mlx5Cmd.ENABLE_HCA, Mlx5Cmd.DISABLE_HCA, Mlx5Cmd.QUERY_ISSI, Mlx5Cmd.SET_ISSI, Mlx5Cmd.QUERY_PAGES,
            Mlx5Cmd.MANAGE_PAGES, Mlx5Cmd.QUERY_HCA_CAP, Mlx5Cmd.SET_HCA_CAP, Mlx5Cmd.INIT_HCA, Mlx5Cmd.TEARDOWN_HCA, Mlx5Cmd.SET_DRIVER_VERSION,
            Mlx5Cmd.ALLOC_UAR, Mlx5Cmd.DEALLOC_UAR, Mlx5Cmd.ALLOC_PD, Mlx5Cmd.DEALLOC_PD, Mlx5Cmd.CREATE_EQ, Mlx5Cmd.DESTROY_EQ, Mlx5Cmd.QUERY_EQ,
            Mlx5Cmd.GEN_EQE, Mlx5Cmd.NOP, Mlx5Cmd.CREATE_CQ, Mlx5Cmd.DESTROY_CQ, Mlx5Cmd.QUERY_CQ, Mlx5Cmd.CREATE_QP, Mlx5Cmd.DESTROY_QP,
            Qp.RST2INIT_QP, Qp.INIT2INIT_QP, Qp.INIT2RTR_QP, Qp.RTR2RTS_QP, Qp.RTS2RTS_QP, Qp.SQERR2RTS_QP, Qp.QP_2ERR, Qp.QP_2RST,
            Qp.QUERY_QP, Mlx5Cmd.CREATE_MKEY, Mlx5Cmd.DESTROY_MKEY, Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT, Mlx5Cmd.QUERY_HCA_VPORT_GID,
            // DevX: executed by the BlueField-3 (half of the tries), BAD_OP on the ConnectX-4
            Mlx5Cmd.CREATE_UCTX, Mlx5Cmd.DESTROY_UCTX, Mlx5Cmd.CREATE_UMEM, Mlx5Cmd.DESTROY_UMEM, Mlx5Cmd.CREATE_GENERAL_OBJECT,
            Mlx5Cmd.MODIFY_GENERAL_OBJECT, Mlx5Cmd.QUERY_GENERAL_OBJECT, Mlx5Cmd.DESTROY_GENERAL_OBJECT };
    static final Set<Integer> KNOWN_SET = java.util.Arrays.stream(KNOWN).boxed().collect(Collectors.toUnmodifiableSet());
    /** Opcodes of the PRM the model did not build when this was written (any status), and some that are no command at all (BAD_OP). */
    static final int[] UNBUILT = { Mlx5Cmd.QUERY_ADAPTER, Mlx5Cmd.PAGE_FAULT_RESUME, Mlx5Cmd.CREATE_SRQ, Mlx5Cmd.DESTROY_SRQ,
            Mlx5Cmd.QUERY_VPORT_STATE, Mlx5Cmd.ACCESS_REG, 0x0000, 0xffff, 0x7777, 0x0106, 0x0201, 0x0300, 0x0403, 0x050c };

    // ------------------------------------------------------------------ coverage

    /** What one property reached. */
    static final class Stats {
        final String name;
        final ConcurrentSkipListMap<String, LongAdder> outcomes = new ConcurrentSkipListMap<>();
        final ConcurrentSkipListMap<Integer, LongAdder> deliveries = new ConcurrentSkipListMap<>();
        final Set<Integer> statuses = ConcurrentHashMap.newKeySet();
        final Set<Integer> syndromes = ConcurrentHashMap.newKeySet();
        final Set<Integer> opcodesDelivered = ConcurrentHashMap.newKeySet();
        final LongAdder tries = new LongAdder();
        final LongAdder commands = new LongAdder();
        final LongAdder oracleChecked = new LongAdder();
        final LongAdder parked = new LongAdder();
        final LongAdder parkedAnswered = new LongAdder();
        final LongAdder pageRequests = new LongAdder();
        final LongAdder unmapped = new LongAdder();
        final LongAdder faults = new LongAdder();
        final LongAdder noise = new LongAdder();
        final LongAdder setupNanos = new LongAdder();
        final LongAdder tryNanos = new LongAdder();
        final java.util.concurrent.atomic.AtomicInteger deepestLevel = new java.util.concurrent.atomic.AtomicInteger();
        final LongAdder qpsCreated = new LongAdder();
        final LongAdder eqsCreated = new LongAdder();
        final LongAdder dpaObjects = new LongAdder();

        Stats(String name) {
            this.name = name;
        }

        void delivery(int d) {
            deliveries.computeIfAbsent(d, k -> new LongAdder()).increment();
        }

        void outcome(int opcode, int status, int syndrome) {
            statuses.add(status);
            syndromes.add(syndrome);
            opcodesDelivered.add(opcode);
            outcomes.computeIfAbsent(String.format("%s status=0x%02x synd=0x%08x", opName(opcode), status, syndrome), k -> new LongAdder())
                    .increment();
        }

        String summary() {
            long t = Math.max(1, tries.sum());
            return String.format("CommandFuzzTest %s: tries %d, commands %d (oracle-checked %d), page requests answered %d, commands parked until answered %d, "
                    + "parked past 200 ms %d, noise %d, pages unmapped under the firmware %d, IOMMU faults %d, "
                    + "deliveries %s, command statuses %s, syndromes %d, opcodes delivered %d, (opcode,status,syndrome) %d, deepest level %d, "
                    + "EQs %d, QPs %d, DPA objects %d created, setup %.1f ms/try, try %.1f ms", name, tries.sum(), commands.sum(), oracleChecked.sum(),
                    pageRequests.sum(), parkedAnswered.sum(), parked.sum(), noise.sum(), unmapped.sum(), faults.sum(),
                    deliveries.entrySet().stream().map(e -> CmdEntry.deliveryName(e.getKey()) + "=" + e.getValue().sum())
                            .collect(Collectors.joining(", ", "{", "}")),
                    new TreeSet<>(statuses).stream().map(s -> String.format("0x%02x", s)).collect(Collectors.joining(",", "{", "}")),
                    syndromes.size(), opcodesDelivered.size(), outcomes.size(), deepestLevel.get(), eqsCreated.sum(), qpsCreated.sum(), dpaObjects.sum(),
                    setupNanos.sum() / 1e6 / t, tryNanos.sum() / 1e6 / t);
        }
    }

    static final Map<String, Stats> STATS = new ConcurrentHashMap<>();
    static Path dir;

    static Stats stats(String property) {
        return STATS.computeIfAbsent(property, Stats::new);
    }

    static String opName(int opcode) {
        String n = Mlx5Cmd.name(opcode);
        return n.startsWith("unknown") ? String.format("op_0x%04x", opcode) : n;
    }

    @BeforeContainer
    static void tmp() throws IOException {
        dir = Files.createTempDirectory("cmdfuzz");
    }

    @AfterContainer
    static void report() throws IOException {
        for (Stats s : new TreeMap<>(STATS).values()) {
            System.out.println(s.summary());
        }
        try (var files = Files.list(dir)) {
            for (Path p : files.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(dir);
    }

    // ------------------------------------------------------------------ the rig: one device, its memory, the driver's side

    /** A page mapped for the device. */
    record Page(MemorySegment mem, long iova) {
    }

    /** What one command came back with. */
    record Outcome(int delivery, int status, int syndrome, MemorySegment outHeader) {
        boolean ok() {
            return delivery == CmdEntry.DELIVERY_OK && status == Mlx5Cmd.STAT_OK;
        }
    }

    /** Mailbox chain faults. */
    enum Fault {
        NONE, SHORT, EXTRA, LOOP, BLOCK_NUMBER, TOKEN, NEXT_UNMAPPED, NEXT_INTO_QUEUE, NEXT_LOW_BITS, RANDOM_BLOCK, SIGNATURES, FIRST_ZERO,
        FIRST_UNMAPPED, FIRST_MISALIGNED, FIRST_HALF_BLOCK, FIRST_INTO_QUEUE, FIRST_RANDOM
    }

    /** One command as the driver would hand it over (or mishandle it). */
    static final class Spec {
        int slot;
        int type = CmdEntry.PCI_CMD_XPORT;
        byte[] in;
        int inlen;
        int outlen;
        Integer token;
        Fault inFault = Fault.NONE;
        Fault outFault = Fault.NONE;
        int inAt;
        int outAt;
        long faultValue;
        /** Random bytes for the whole entry (then only the own bit is forced), or null. */
        byte[] rawEntry;
        /** Random bytes put into every mailbox block built (headers included), or null. */
        boolean rawBlocks;
        /** Random reserved bytes of the entry (signature, the bytes around the lengths). */
        boolean dirtyEntry;
        /** Filled by the rig: what the created object was, for the object lists. */
        Runnable onOk;
        String what = "";

        Spec(int slot, int opcode, int opMod, int inlen, int outlen) {
            this.slot = slot;
            this.in = new byte[Math.max(16, inlen)];
            MemorySegment s = MemorySegment.ofArray(in);
            s.set(BE32, 0, opcode << 16);
            s.set(BE32, 4, opMod & 0xffff);
            this.inlen = inlen;
            this.outlen = outlen;
        }

        MemorySegment inSeg() {
            return MemorySegment.ofArray(in);
        }

        int opcode() {
            return rawEntry != null ? MemorySegment.ofArray(rawEntry).get(BE32, CmdEntry.IN) >>> 16 : MemorySegment.ofArray(in).get(BE32, 0) >>> 16;
        }

        @Override
        public String toString() {
            return String.format("%s slot %d type %d inlen %d outlen %d in %s out %s%s%s %s", opName(opcode()), slot, type, inlen, outlen, inFault, outFault,
                    rawEntry != null ? " RAW" : "", rawBlocks ? " RAWBLOCKS" : "", what);
        }
    }

    /** A QP the fuzz created with its doorbell record and SQ in pages of the rig (for doorbell noise). */
    record FuzzQp(int qpn, int uar, Page dbr, List<Page> buf, int logSq, long sqOffset) {
    }

    static final class Rig implements AutoCloseable {
        final Stats stats;
        final Mm mm;
        final Iommu iommu;
        final StandalonePciBus bus;
        final ConnectX4Device dev;
        final PciFunction fn;
        final Thread firmware;
        final List<Throwable> died = new CopyOnWriteArrayList<>();
        final List<Long> pfns = new ArrayList<>();
        /** IOVAs mapped now (an unmap under the device takes its IOVA out; the allocator may hand it out again). */
        final java.util.Set<Long> iovas = new java.util.LinkedHashSet<>();
        /** Page IOVA → its memory: everything the device can reach. */
        final Map<Long, MemorySegment> mapped = new HashMap<>();
        final List<Page> mailboxPages = new ArrayList<>();
        /** Pages handed to the device by commands (given, rings, records, buffers, MTTs): candidates for an unmap under it. */
        final List<Page> objectPages = new ArrayList<>();

        int mailboxCursor;
        final Page queue;
        final byte token;
        // what the firmware handed out (by successful commands), for valid-looking references
        final List<Integer> uars = new ArrayList<>();
        final List<Integer> pds = new ArrayList<>();
        final List<Integer> eqns = new ArrayList<>();
        final List<Integer> cqns = new ArrayList<>();
        final List<Integer> qpns = new ArrayList<>();
        final List<Integer> mkeys = new ArrayList<>();
        /** DevX: user contexts and umems handed out. */
        final List<Integer> uids = new ArrayList<>();
        final List<Integer> umems = new ArrayList<>();
        /** DPA general objects the try made: {type, id} ({@link DpaCommandFuzz}). */
        final List<int[]> dpaObjs = new ArrayList<>();
        final List<Long> given = new ArrayList<>();
        final Map<Integer, FuzzQp> qps = new HashMap<>();
        final List<String> log = new ArrayList<>();
        int level;
        /** The EQ the harness takes page requests from (level 5), its ring and consumer index. */
        int prEqn = -1;
        int prUar;
        Page prRing;
        /** log2 of the harness EQ's entries (64 unless a test made a smaller one). */
        int prLog = 6;
        int prCi;
        boolean serving;
        /** Pages for a command still owned after 200 ms although no page request reached the harness (off: that is a hang). */
        boolean giveWhenParked = true;

        Rig(Stats stats, Path swap, byte token) {
            this(stats, swap, token, ConnectX4Device.DEVICE_CONNECTX4);
        }

        /** A rig around a device of {@code deviceId} (a BlueField-3 for DevX). */
        Rig(Stats stats, Path swap, byte token, int deviceId) {
            long t0 = System.nanoTime();
            this.stats = stats;
            this.token = token;
            mm = new Mm(16L << 20, true, swap, 1 << 20);
            iommu = new Iommu(mm);
            bus = new StandalonePciBus(iommu);
            dev = new ConnectX4Device("mlx5-fuzz", deviceId, new org.peerdirect.hca.boards.Fabric());
            fn = bus.register(dev.spec());
            firmware = firmwareThread("fw-" + fn.bdf());
            firmware.setUncaughtExceptionHandler((t, e) -> died.add(e));
            // mlx5_cmd_init
            long deadline = System.nanoTime() + COMMAND_BOUND_NANOS;
            while ((fn.read32be(0, InitSeg.INITIALIZING) & InitSeg.INITIALIZING_BIT) != 0) {
                check(System.nanoTime() < deadline, "firmware ready within 10 s");
                Thread.onSpinWait();
            }
            check(fn.read32be(0, InitSeg.CMDIF_REV_FW_SUB) >>> 16 == InitSeg.CMD_IF_REV, "command interface revision 5");
            queue = mailboxPage();
            fn.write32be(0, InitSeg.CMDQ_ADDR_H, (int) (queue.iova() >>> 32));
            fn.write32be(0, InitSeg.CMDQ_ADDR_L_SZ, (int) queue.iova());
            stats.setupNanos.add(System.nanoTime() - t0);
        }

        static Thread firmwareThread(String name) {
            Thread[] all = new Thread[Thread.activeCount() + 16];
            int n = Thread.currentThread().getThreadGroup().enumerate(all, true);
            for (int i = 0; i < n; i++) {
                if (all[i].getName().equals(name) && all[i].isAlive()) {
                    return all[i];
                }
            }
            return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(name) && t.isAlive()).findFirst()
                    .orElseThrow(() -> new AssertionError("no firmware thread " + name));
        }

        Page page() {
            Page p = mailboxPage();
            objectPages.add(p);
            return p;
        }

        /**
         * The driver's bug: a page the device was given (a firmware page, a ring, a record) unmapped
         * while the device still uses it. Later DMA there is an IOMMU fault, never a violation; the
         * frame stays allocated (and is freed at the end, unmapped).
         */
        void unmapUnder(SplittableRandom r) {
            List<Page> candidates = objectPages.stream().filter(p -> mapped.get(p.iova()) == p.mem() && p != prRing).toList();
            if (candidates.isEmpty()) {
                return;
            }
            Page p = candidates.get(r.nextInt(candidates.size()));
            fn.dma().dmaUnmap(p.iova(), 1);
            iovas.remove(p.iova());
            mapped.remove(p.iova());
            objectPages.remove(p);
            stats.unmapped.increment();
        }

        Page mailboxPage() {
            long pfn = mm.allocPages(0);
            pfns.add(pfn);
            long iova = fn.dma().dmaMapPage(pfn, DmaDirection.BIDIRECTIONAL);
            iovas.add(iova);
            MemorySegment m = mm.pageAddress(pfn, 0);
            m.fill((byte) 0);
            mapped.put(iova, m);
            return new Page(m, iova);
        }

        /** A mailbox block (1024-aligned, four to a page), reused from the next command on. */
        long block() {
            if (harnessBlocks) { // the harness's commands while fuzzed ones are in flight: blocks of their own, far from theirs
                int b = harnessCursor++;
                while (b / 4 >= harnessPages.size()) {
                    harnessPages.add(mailboxPage());
                }
                return harnessPages.get(b / 4).iova() + (b % 4) * CmdMailbox.ALIGN;
            }
            int b = mailboxCursor++;
            while (b / 4 >= mailboxPages.size()) {
                mailboxPages.add(mailboxPage());
            }
            return mailboxPages.get(b / 4).iova() + (b % 4) * CmdMailbox.ALIGN;
        }

        final List<Page> harnessPages = new ArrayList<>();
        int harnessCursor;
        boolean harnessBlocks;

        MemorySegment mem(long blockIova) {
            return mapped.get(blockIova & ~4095L).asSlice(blockIova & 4095, CmdMailbox.SIZE);
        }

        MemorySegment entry(int slot) {
            return queue.mem().asSlice((long) slot * CmdEntry.SIZE, CmdEntry.SIZE);
        }

        // -------------------------------------------------------------- building an entry

        /** Builds the mailbox chain for {@code len} bytes of {@code data}; returns the pointer for the entry. */
        long chain(int len, byte[] data, byte tok, Fault f, int at, long v, boolean raw, SplittableRandom r) {
            int n = len <= CmdEntry.INLINE || len > CommandQueue.MAX_LENGTH + 4096 ? Math.max(0, Math.min(CmdMailbox.blocks(Math.min(len, 4096)), 8))
                    : CmdMailbox.blocks(len);
            int build = Math.min(n, MAX_BUILD);
            if (f == Fault.SHORT) {
                build = build == 0 ? 0 : Math.floorMod(at, build);
            } else if (f == Fault.EXTRA) {
                build += 1 + (at & 3);
            }
            long[] addr = new long[build];
            for (int i = 0; i < build; i++) {
                addr[i] = block();
            }
            for (int i = 0; i < build; i++) {
                MemorySegment b = mem(addr[i]);
                b.fill((byte) 0);
                int off = CmdEntry.INLINE + i * CmdMailbox.DATA_SIZE;
                if (data != null && off < data.length) {
                    MemorySegment.copy(data, off, b, ValueLayout.JAVA_BYTE, 0, Math.min(CmdMailbox.DATA_SIZE, data.length - off));
                }
                b.set(BE64, CmdMailbox.NEXT, i + 1 < build ? addr[i + 1] : 0);
                b.set(BE32, CmdMailbox.BLOCK_NUM, i);
                b.set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, tok);
                if (raw) {
                    byte[] junk = new byte[CmdMailbox.SIZE];
                    r.nextBytes(junk);
                    // keep the chain's shape most of the time, so the junk reaches the executor
                    if (r.nextInt(3) != 0) {
                        MemorySegment j = MemorySegment.ofArray(junk);
                        j.set(BE64, CmdMailbox.NEXT, b.get(BE64, CmdMailbox.NEXT));
                        j.set(BE32, CmdMailbox.BLOCK_NUM, i);
                        j.set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, tok);
                    }
                    MemorySegment.copy(junk, 0, b, ValueLayout.JAVA_BYTE, 0, CmdMailbox.SIZE);
                }
            }
            int k = build == 0 ? 0 : Math.floorMod(at, build);
            switch (f) {
                case LOOP -> {
                    if (build > 0) {
                        mem(addr[k]).set(BE64, CmdMailbox.NEXT, addr[Math.floorMod(v, k + 1)]);
                    }
                }
                case BLOCK_NUMBER -> {
                    if (build > 0) {
                        int wrong = (int) v;
                        mem(addr[k]).set(BE32, CmdMailbox.BLOCK_NUM, wrong == k ? k + 1 : wrong);
                    }
                }
                case TOKEN -> {
                    if (build > 0) {
                        mem(addr[k]).set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, (byte) (tok ^ (1 + Math.floorMod(v, 255))));
                    }
                }
                case NEXT_UNMAPPED -> {
                    if (build > 0) {
                        mem(addr[k]).set(BE64, CmdMailbox.NEXT, UNMAPPED + (v & 0xff_fc00L));
                    }
                }
                case NEXT_INTO_QUEUE -> {
                    if (build > 0) {
                        mem(addr[k]).set(BE64, CmdMailbox.NEXT, queue.iova() + (v & 0xc00));
                    }
                }
                case NEXT_LOW_BITS -> {
                    if (build > 0) {
                        MemorySegment b = mem(addr[k]);
                        b.set(BE64, CmdMailbox.NEXT, b.get(BE64, CmdMailbox.NEXT) | (v & 0x3ff) | 1);
                    }
                }
                case RANDOM_BLOCK -> {
                    if (build > 0) {
                        byte[] junk = new byte[CmdMailbox.SIZE];
                        r.nextBytes(junk);
                        MemorySegment.copy(junk, 0, mem(addr[k]), ValueLayout.JAVA_BYTE, 0, CmdMailbox.SIZE);
                    }
                }
                case SIGNATURES -> {
                    for (long a : addr) {
                        mem(a).set(ValueLayout.JAVA_BYTE, CmdMailbox.CTRL_SIG, (byte) r.nextInt());
                        mem(a).set(ValueLayout.JAVA_BYTE, CmdMailbox.SIG, (byte) r.nextInt());
                    }
                }
                default -> {
                }
            }
            long first = build == 0 ? 0 : addr[0];
            return switch (f) {
                case FIRST_ZERO -> 0;
                case FIRST_UNMAPPED -> UNMAPPED + (v & 0xff_fc00L);
                case FIRST_MISALIGNED -> first + 1 + Math.floorMod(v, 511);
                case FIRST_HALF_BLOCK -> first + 512;
                case FIRST_INTO_QUEUE -> queue.iova() + (v & 0xe00);
                case FIRST_RANDOM -> v;
                default -> first;
            };
        }

        /** Writes the entry of {@code s} into its slot, its mailbox chains first, the owner bit last. */
        void write(Spec s, SplittableRandom r) {
            MemorySegment e = entry(s.slot);
            byte tok = s.token == null ? token : (byte) (int) s.token;
            byte[] bytes = new byte[CmdEntry.SIZE];
            MemorySegment b = MemorySegment.ofArray(bytes);
            if (s.rawEntry != null) {
                System.arraycopy(s.rawEntry, 0, bytes, 0, CmdEntry.SIZE);
                // random bytes, but the pointers point at chains that exist half of the time
                int inlen = b.get(BE32, CmdEntry.INPUT_LENGTH);
                int outlen = b.get(BE32, CmdEntry.OUTPUT_LENGTH);
                byte rawTok = b.get(ValueLayout.JAVA_BYTE, CmdEntry.TOKEN);
                if (r.nextBoolean()) {
                    b.set(BE64, CmdEntry.IN_PTR, chain(inlen, null, rawTok, Fault.NONE, 0, 0, true, r));
                }
                if (r.nextBoolean()) {
                    b.set(BE64, CmdEntry.OUT_PTR, chain(outlen, null, rawTok, Fault.NONE, 0, 0, r.nextBoolean(), r));
                }
            } else {
                long inPtr = chain(s.inlen, s.in, tok, s.inFault, s.inAt, s.faultValue, s.rawBlocks, r);
                long outPtr = chain(s.outlen, null, tok, s.outFault, s.outAt, s.faultValue, s.rawBlocks && r.nextBoolean(), r);
                if (s.dirtyEntry) {
                    r.nextBytes(bytes);
                }
                MemorySegment.copy(s.in, 0, b, ValueLayout.JAVA_BYTE, CmdEntry.IN, Math.min(16, s.in.length));
                if (!s.dirtyEntry) {
                    MemorySegment.copy(new byte[16], 0, b, ValueLayout.JAVA_BYTE, CmdEntry.OUT, 16);
                }
                b.set(ValueLayout.JAVA_BYTE, CmdEntry.TYPE, (byte) s.type);
                b.set(BE32, CmdEntry.INPUT_LENGTH, s.inlen);
                b.set(BE64, CmdEntry.IN_PTR, inPtr);
                b.set(BE64, CmdEntry.OUT_PTR, outPtr);
                b.set(BE32, CmdEntry.OUTPUT_LENGTH, s.outlen);
                b.set(ValueLayout.JAVA_BYTE, CmdEntry.TOKEN, tok);
            }
            // everything but the status byte, then the status byte with the owner bit (release)
            MemorySegment.copy(bytes, 0, e, ValueLayout.JAVA_BYTE, 0, (int) CmdEntry.STATUS_OWN);
            byte own = (byte) (bytes[(int) CmdEntry.STATUS_OWN] | CmdEntry.OWNER_HW);
            VarHandle.releaseFence();
            OWNER.setVolatile(e, CmdEntry.STATUS_OWN, own);
        }

        // -------------------------------------------------------------- the oracle: the PRM's checks, in order, on memory

        /** The delivery status the entry must get, from its bytes and the chains in memory; -1 when not decidable here. */
        int expectedDelivery(MemorySegment e) {
            if (e.get(ValueLayout.JAVA_BYTE, CmdEntry.TYPE) != CmdEntry.PCI_CMD_XPORT) {
                return CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR;
            }
            int inlen = e.get(BE32, CmdEntry.INPUT_LENGTH);
            int outlen = e.get(BE32, CmdEntry.OUTPUT_LENGTH);
            if (inlen < CmdEntry.INLINE || inlen > CommandQueue.MAX_LENGTH) {
                return CmdEntry.DELIVERY_IN_LENGTH_ERR;
            }
            if (outlen < CmdEntry.INLINE || outlen > CommandQueue.MAX_LENGTH) {
                return CmdEntry.DELIVERY_OUT_LENGTH_ERR;
            }
            long inPtr = e.get(BE64, CmdEntry.IN_PTR);
            long outPtr = e.get(BE64, CmdEntry.OUT_PTR);
            if (CmdMailbox.blocks(inlen) > 0 && (inPtr & 511) != 0) {
                return CmdEntry.DELIVERY_IN_PTR_ALIGN_ERR;
            }
            if (CmdMailbox.blocks(outlen) > 0 && (outPtr & 511) != 0) {
                return CmdEntry.DELIVERY_OUT_PTR_ALIGN_ERR;
            }
            byte tok = e.get(ValueLayout.JAVA_BYTE, CmdEntry.TOKEN);
            int in = walk(inPtr, inlen, tok);
            if (in != CmdEntry.DELIVERY_OK) {
                return in;
            }
            return walk(outPtr, outlen, tok);
        }

        private int walk(long ptr, int length, byte tok) {
            int n = CmdMailbox.blocks(length);
            long p = ptr;
            for (int i = 0; i < n; i++) {
                if (p == 0) {
                    return CmdEntry.DELIVERY_BAD_BLOCK_NUMBER; // the chain ends before the command does
                }
                MemorySegment page = mapped.get(p & ~4095L);
                if (page == null) {
                    return CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR; // outside every mapping: the IOMMU stops the read
                }
                if ((p & ~4095L) == queue.iova()) {
                    return -1; // a block in the queue page: entries change under it (ownership, outputs), not decided here
                }
                if ((p & 4095) + CmdMailbox.SIZE > 4096) {
                    return -1; // a block across a page boundary: depends on the IOVA layout, not decided here
                }
                long o = p & 4095;
                if (page.get(BE32, o + CmdMailbox.BLOCK_NUM) != i) {
                    return CmdEntry.DELIVERY_BAD_BLOCK_NUMBER;
                }
                if (page.get(ValueLayout.JAVA_BYTE, o + CmdMailbox.TOKEN) != tok) {
                    return CmdEntry.DELIVERY_TOKEN_ERR;
                }
                p = page.get(BE64, o + CmdMailbox.NEXT) & ~(CmdMailbox.ALIGN - 1);
            }
            return CmdEntry.DELIVERY_OK;
        }

        // -------------------------------------------------------------- running

        static final VarHandle OWNER = ValueLayout.JAVA_BYTE.varHandle();

        boolean owned(int slot) {
            return ((byte) OWNER.getVolatile(entry(slot), CmdEntry.STATUS_OWN) & CmdEntry.OWNER_HW) != 0;
        }

        /** Submits the commands on one doorbell and waits for each; checks every outcome. */
        List<Outcome> run(List<Spec> specs, SplittableRandom r) {
            mailboxCursor = 0;
            int mask = 0;
            int[] expected = new int[specs.size()];
            for (int i = 0; i < specs.size(); i++) {
                Spec s = specs.get(i);
                check((mask & 1 << s.slot) == 0, "one command per slot");
                write(s, r);
                mask |= 1 << s.slot;
            }
            // the oracle once everything is in memory (a chain of one command may lie next to another's blocks)
            for (int i = 0; i < specs.size(); i++) {
                expected[i] = expectedDelivery(entry(specs.get(i).slot));
            }
            fn.write32be(0, InitSeg.CMD_DBELL, mask);
            List<Outcome> out = new ArrayList<>();
            for (int i = 0; i < specs.size(); i++) {
                Spec s = specs.get(i);
                waitFor(s);
                Outcome o = outcome(s.slot);
                if (log.size() >= 40) {
                    log.remove(0);
                }
                log.add(s + " -> " + CmdEntry.deliveryName(o.delivery()) + String.format(" 0x%02x 0x%08x", o.status(), o.syndrome()));
                judge(s, o, expected[i]);
                out.add(o);
                if (o.ok() && s.onOk != null) {
                    s.onOk.run();
                }
            }
            return out;
        }

        Outcome run(Spec s, SplittableRandom r) {
            return run(List.of(s), r).get(0);
        }

        void waitFor(Spec s) {
            long start = System.nanoTime();
            boolean gave = false;
            while (owned(s.slot)) {
                // page requests are answered lazily, as a busy driver's work queue does: a command
                // still owned after a millisecond may be parked for them
                if (System.nanoTime() - start > LAZY_NANOS) {
                    boolean waiting = owned(s.slot); // a millisecond on: parked (or slow); the answer re-runs it at once
                    if (servePageRequests() > 0 && waiting) {
                        stats.parkedAnswered.increment();
                    }
                }
                long waited = System.nanoTime() - start;
                if (!gave && giveWhenParked && waited > PARK_SUSPECT_NANOS) {
                    // parked for firmware pages with no page request the harness saw (the EQ of the
                    // fuzz, not the harness's): the driver gives pages anyway
                    gave = true;
                    stats.parked.increment();
                    if (stats.parked.sum() <= 3) { // a fuzzed EQ took the page request (the driver's own EQ, unserved): show the first few
                        System.out.println("PARKED past 200 ms without a page request to the harness: " + s + "\n  device: " + dev.describe()
                                + "\n  harness EQ " + prEqn + " ci " + prCi + "\n  last commands:\n    " + String.join("\n    ", log));
                    }
                    harness(give(SLOT_GIVE, fresh(16)));
                    start = System.nanoTime();
                    continue;
                }
                check(waited < COMMAND_BOUND_NANOS, "the firmware hands the entry back within 10 s: " + s + " (device: " + dev.describe()
                        + ", firmware " + (firmware.isAlive() ? "alive" : "DEAD") + ", died of " + died + ")" + firmwareStack());
                Thread.onSpinWait();
            }
        }

        /**
     * A command of the harness on its own slot, while fuzzed ones may be parked: its mailboxes
     * come after theirs (the cursor runs on), it is waited for without serving page requests.
     */
    Outcome harness(Spec g) {
        harnessCursor = 0;
        harnessBlocks = true;
        int expected;
        try {
            write(g, new SplittableRandom(0));
            expected = expectedDelivery(entry(g.slot));
        } finally {
            harnessBlocks = false;
        }
        fn.write32be(0, InitSeg.CMD_DBELL, 1 << g.slot);
        long deadline = System.nanoTime() + COMMAND_BOUND_NANOS;
        while (owned(g.slot)) {
            check(System.nanoTime() < deadline, "the harness's " + g + " completes within 10 s (device: " + dev.describe() + ")" + firmwareStack());
            Thread.onSpinWait();
        }
        Outcome o = outcome(g.slot);
        judge(g, o, expected);
        if (o.ok() && g.onOk != null) {
            g.onOk.run();
        }
        return o;
    }

    /**
     * The page-request EQ of the harness (level 5): every new EQE is consumed (consumer index to
     * the UAR doorbell) and a page request answered as {@code mlx5_core}'s page handler does:
     * MANAGE_PAGES GIVE of fresh pages, or TAKE when the firmware returns pages.
     */
    int servePageRequests() {
        if (prEqn < 0 || serving) {
            return 0;
        }
        serving = true;
        int answered = 0;
        try {
            while (true) {
                long off = (long) (prCi & (1 << prLog) - 1) * Eq.EQE_SIZE;
                int own = (byte) OWNER.getVolatile(prRing.mem(), off + Eq.EQE_OWNER) & 1;
                if (own != (prCi >>> prLog & 1)) {
                    return answered;
                }
                VarHandle.acquireFence();
                int type = prRing.mem().get(ValueLayout.JAVA_BYTE, off + Eq.EQE_TYPE) & 0xff;
                int n = prRing.mem().get(BE32, off + Eq.PAGE_REQ_NUM_PAGES);
                prCi++;
                fn.write32be(0, ((long) prUar << 12) + Eq.UAR_EQ_CI, prEqn << 24 | prCi & 0xff_ffff);
                if (type != Eq.EVENT_PAGE_REQUEST) {
                    continue; // a GEN_EQE of the fuzz
                }
                stats.pageRequests.increment();
                answered++;
                if (n > 0) {
                    harness(give(SLOT_GIVE, fresh(Math.min(n, 64))));
                } else if (n < 0) {
                    int k = Math.min(-n, 64);
                    Spec t = new Spec(SLOT_GIVE, Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_TAKE, 16, (int) Pages.MANAGE_OUT_PAS + 8 * k);
                    t.inSeg().set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, k);
                    harness(t);
                }
            }
        } finally {
            serving = false;
        }
    }

    Outcome outcome(int slot) {
            MemorySegment e = entry(slot);
            int d = ((byte) OWNER.getVolatile(e, CmdEntry.STATUS_OWN) & 0xff) >>> 1;
            MemorySegment out = MemorySegment.ofArray(new byte[16]);
            MemorySegment.copy(e, CmdEntry.OUT, out, 0, 16);
            return new Outcome(d, out.get(ValueLayout.JAVA_BYTE, 0) & 0xff, out.get(BE32, 4), out);
        }

        /** The per-command invariants, and the coverage counts. */
        void judge(Spec s, Outcome o, int expected) {
            stats.commands.increment();
            stats.delivery(o.delivery());
            check(DELIVERY_STATUSES.contains(o.delivery()), "a delivery status of the PRM: 0x" + Integer.toHexString(o.delivery()) + " for " + s);
            if (expected >= 0) {
                stats.oracleChecked.increment();
                check(o.delivery() == expected, "delivery " + CmdEntry.deliveryName(o.delivery()) + ", expected " + CmdEntry.deliveryName(expected)
                        + " for " + s);
            }
            if (o.delivery() != CmdEntry.DELIVERY_OK) {
                return;
            }
            int opcode = entry(s.slot).get(BE32, CmdEntry.IN) >>> 16;
            stats.outcome(opcode, o.status(), o.syndrome());
            check(COMMAND_STATUSES.contains(o.status()), "a command status of the PRM: 0x" + Integer.toHexString(o.status()) + " for " + s);
            if (o.status() == Mlx5Cmd.STAT_OK) {
                check(o.syndrome() == 0, "OK with syndrome 0, not 0x" + Integer.toHexString(o.syndrome()) + " for " + s);
            } else {
                check(o.syndrome() != 0, "a failed command names its check in the syndrome: status 0x" + Integer.toHexString(o.status()) + " for " + s
                        + " (" + dev.lastRefusal() + ")");
            }
            if (!KNOWN_SET.contains(opcode) && Mlx5Cmd.name(opcode).startsWith("unknown")) {
                // no command of the PRM the interface names (a named one the model may build any day: SRQs, ...)
                check(o.status() == Mlx5Cmd.STAT_BAD_OP_ERR && o.syndrome() == Syndromes.SYND_UNKNOWN_OPCODE,
                        String.format("an unknown opcode 0x%x is BAD_OP with the unknown-opcode syndrome, not 0x%x/0x%x", opcode, o.status(), o.syndrome()));
            }
            // a NOP of no user context (uid 0) and op_mod 0; a uid naming no CREATE_UCTX context is
            // refused on a DevX device (0x0bad0011) like any other command's
            if (opcode == Mlx5Cmd.NOP && (in32(s, 0) & 0xffff) == 0 && (in32(s, 4) & 0xffff) == 0 && s.rawEntry == null) {
                check(o.status() == Mlx5Cmd.STAT_OK, "NOP succeeds in every state: " + s + ": status 0x" + Integer.toHexString(o.status()) + " syndrome 0x" + Integer.toHexString(o.syndrome()) + " (" + dev.lastRefusal() + ")");
            }
        }

        static int in32(Spec s, int off) {
            return s.rawEntry != null ? MemorySegment.ofArray(s.rawEntry).get(BE32, CmdEntry.IN + off) : s.inSeg().get(BE32, off);
        }

        /** The good command after each fuzzed one: a NOP on the harness's slot must succeed, the firmware must live. */
        void stillGood() {
            Outcome o = run(new Spec(SLOT_HARNESS, Mlx5Cmd.NOP, 0, 16, 16), new SplittableRandom(1));
            check(o.ok(), "a NOP after the fuzzed command succeeds: " + CmdEntry.deliveryName(o.delivery()) + " status 0x"
                    + Integer.toHexString(o.status()) + " (" + dev.lastRefusal() + ")");
            alive();
        }

        /** Where the firmware thread is (for a hang's report). */
        String firmwareStack() {
            StringBuilder b = new StringBuilder("\n  firmware thread " + firmware.getState() + ":");
            for (StackTraceElement e : firmware.getStackTrace()) {
                b.append("\n    at ").append(e);
            }
            return b.toString();
        }

        void alive() {
            check(firmware.isAlive(), "the firmware thread is alive (died of " + died + ")");
            check(died.isEmpty(), "the firmware thread threw nothing: " + died);
            check(bus.warnings().isEmpty(), "no BAR write handler threw: " + bus.warnings());
        }

        Outcome ok(Spec s) {
            Outcome o = run(s, new SplittableRandom(2));
            check(o.ok(), "bring-up " + s + ": " + CmdEntry.deliveryName(o.delivery()) + " status 0x" + Integer.toHexString(o.status()) + " synd 0x"
                    + Integer.toHexString(o.syndrome()) + " (" + dev.lastRefusal() + ")");
            return o;
        }

        // -------------------------------------------------------------- bring-up levels

        /**
         * 0 DISABLED; 1 ENABLED; 2 INITIALIZED (boot and init pages given); 3 with regular pages, a
         * UAR, a PD and an async EQ; 4 with a CQ, an RC QP and an mkey; 5 with a page-request EQ
         * the harness serves.
         */
        void bringUp(int to) {
            level = to;
            if (to >= 1) {
                ok(new Spec(SLOT_HARNESS, Mlx5Cmd.ENABLE_HCA, 0, 16, 16));
            }
            if (to >= 2) {
                ok(give(SLOT_HARNESS, fresh(FirmwarePages.BOOT_PAGES + FirmwarePages.INIT_PAGES)));
                ok(new Spec(SLOT_HARNESS, Mlx5Cmd.INIT_HCA, 0, 16, 16));
            }
            if (to >= 3) {
                ok(give(SLOT_HARNESS, fresh(2))); // few: floods run short of context space (NO_RES, or parked at level 5)
                uars.add(Pages.INDEX24.get(ok(new Spec(SLOT_HARNESS, Mlx5Cmd.ALLOC_UAR, 0, 16, 16)).outHeader(), 0));
                pds.add(Pages.INDEX24.get(ok(new Spec(SLOT_HARNESS, Mlx5Cmd.ALLOC_PD, 0, 16, 16)).outHeader(), 0));
                Spec eq = new Spec(SLOT_HARNESS, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8, 16);
                Eq.EQC_LOG_EQ_SIZE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, 6);
                Eq.EQC_UAR_PAGE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, uars.get(0));
                eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, 1L << Eq.EVENT_CQ_ERROR | 1L << Eq.EVENT_PORT_CHANGE | 1L << Eq.EVENT_COMP);
                eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_PAS, page().iova());
                eqns.add(ok(eq).outHeader().get(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN) & 0xff);
            }
            if (to >= 4) {
                Page cqRing = page();
                Page cqDbr = page();
                Spec cq = new Spec(SLOT_HARNESS, Mlx5Cmd.CREATE_CQ, 0, (int) Cq.CREATE_CQ_IN_PAS + 8, 16);
                Cq.CQC_LOG_CQ_SIZE.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, 6);
                Cq.CQC_UAR_PAGE.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, uars.get(0));
                Cq.CQC_C_EQN.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, eqns.get(0));
                cq.inSeg().set(BE64, Cq.CREATE_CQ_IN_CQC + Cq.CQC_DBR_ADDR, cqDbr.iova());
                cq.inSeg().set(BE64, Cq.CREATE_CQ_IN_PAS, cqRing.iova());
                cqns.add(Pages.INDEX24.get(ok(cq).outHeader(), 0));
                ok(createQp(SLOT_HARNESS, Qp.ST_RC, 2, 2, 1, uars.get(0), pds.get(0), cqns.get(0), cqns.get(0), null));
                ok(createMkey(SLOT_HARNESS, pds.get(0), 0x10000, 8192, fresh(2), true));
            }
            if (to >= 5) { // page requests on: a command short of pages is parked until the harness answers
                Page ring = page();
                for (long off = Eq.EQE_OWNER; off < 4096; off += Eq.EQE_SIZE) {
                    ring.mem().set(ValueLayout.JAVA_BYTE, off, (byte) 1);
                }
                Spec eq = new Spec(SLOT_HARNESS, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8, 16);
                Eq.EQC_LOG_EQ_SIZE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, 6);
                Eq.EQC_UAR_PAGE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, uars.get(0));
                eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, 1L << Eq.EVENT_PAGE_REQUEST);
                eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_PAS, ring.iova());
                int eqn = ok(eq).outHeader().get(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN) & 0xff;
                eqns.add(eqn);
                prRing = ring;
                prUar = uars.get(0);
                prEqn = eqn;
            }
            stats.deepestLevel.accumulateAndGet(to, Math::max);
        }

        long[] fresh(int n) {
            long[] p = new long[n];
            for (int i = 0; i < n; i++) {
                p[i] = page().iova();
            }
            return p;
        }

        Spec give(int slot, long... pas) {
            Spec c = new Spec(slot, Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_GIVE, 16 + 8 * pas.length, 16);
            c.inSeg().set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, pas.length);
            for (int i = 0; i < pas.length; i++) {
                c.inSeg().set(BE64, Pages.MANAGE_IN_PAS + 8L * i, pas[i]);
            }
            c.onOk = () -> {
                for (long p : pas) {
                    given.add(p);
                }
            };
            return c;
        }

        /** CREATE_QP with its buffer in pages of the rig (when {@code pas} is null) and the doorbell record in one more. */
        Spec createQp(int slot, int st, int logSq, int logRq, int logStride, int uar, int pd, int scq, int rcq, long[] pas) {
            long rq = (1L << logRq) << 4 + logStride;
            long bytes = rq + (64L << logSq);
            int npages = (int) ((bytes + 4095) / 4096);
            List<Page> buf = new ArrayList<>();
            long[] p = pas;
            if (p == null) {
                p = new long[npages];
                for (int i = 0; i < npages; i++) {
                    Page pg = page();
                    buf.add(pg);
                    p[i] = pg.iova();
                }
            }
            Page dbr = page();
            Spec c = new Spec(slot, Mlx5Cmd.CREATE_QP, 0, (int) Qp.CREATE_QP_IN_PAS + 8 * p.length, 16);
            MemorySegment in = c.inSeg();
            long q = Qp.IN_QPC;
            Qp.QPC_ST.set(in, q, st);
            Qp.QPC_PM_STATE.set(in, q, Qp.PM_MIGRATED);
            Qp.QPC_PD.set(in, q, pd);
            Qp.QPC_RQ_TYPE.set(in, q, Qp.RQ_REGULAR);
            Qp.QPC_LOG_RQ_SIZE.set(in, q, logRq);
            Qp.QPC_LOG_RQ_STRIDE.set(in, q, logStride);
            Qp.QPC_LOG_SQ_SIZE.set(in, q, logSq);
            Qp.QPC_UAR_PAGE.set(in, q, uar);
            Qp.QPC_CQN_SND.set(in, q, scq);
            Qp.QPC_CQN_RCV.set(in, q, rcq);
            Qp.QPC_PRI_VHCA_PORT_NUM.set(in, q, 1);
            in.set(BE64, q + Qp.QPC_DBR_ADDR, dbr.iova());
            for (int i = 0; i < p.length; i++) {
                in.set(BE64, Qp.CREATE_QP_IN_PAS + 8L * i, p[i]);
            }
            c.onOk = () -> {
                int qpn = Pages.INDEX24.get(entryOut(c.slot), 0);
                qpns.add(qpn);
                stats.qpsCreated.increment();
                if (!buf.isEmpty()) {
                    qps.put(qpn, new FuzzQp(qpn, uar, dbr, buf, logSq, rq));
                }
            };
            return c;
        }

        MemorySegment entryOut(int slot) {
            return outcome(slot).outHeader();
        }

        Spec createMkey(int slot, int pd, long start, long len, long[] mtt, boolean rdEn) {
            Spec c = new Spec(slot, Mlx5Cmd.CREATE_MKEY, 0, (int) Mkey.CREATE_IN_MTT + 8 * mtt.length, 16);
            MemorySegment in = c.inSeg();
            long m = Mkey.CREATE_IN_MKC;
            Mkey.MKC_ACCESS_MODE_1_0.set(in, m, Mkey.ACCESS_MODE_MTT);
            Mkey.MKC_LR.set(in, m, 1);
            Mkey.MKC_LW.set(in, m, 1);
            Mkey.MKC_RR.set(in, m, 1);
            Mkey.MKC_RW.set(in, m, 1);
            Mkey.MKC_PD.set(in, m, pd);
            Mkey.MKC_LOG_PAGE_SIZE.set(in, m, 12);
            in.set(BE64, m + Mkey.MKC_START_ADDR, start);
            in.set(BE64, m + Mkey.MKC_LEN, len);
            in.set(BE32, Mkey.CREATE_IN_OCTWORD_ACTUAL_SIZE, (mtt.length + 1) / 2);
            for (int i = 0; i < mtt.length; i++) {
                in.set(BE64, Mkey.CREATE_IN_MTT + 8L * i, mtt[i] | (rdEn ? Mkey.MTT_READ | Mkey.MTT_WRITE : 0));
            }
            c.onOk = () -> mkeys.add(Pages.INDEX24.get(entryOut(c.slot), 0));
            return c;
        }

        /** The device closed, every page unmapped and freed, the bus closed: the audit of this try. */
        @Override
        public void close() {
            alive();
            dev.close();
            check(!firmware.isAlive(), "the firmware thread ends with the device");
            for (long iova : iovas) {
                fn.dma().dmaUnmap(iova, 1);
            }
            for (long pfn : pfns) {
                mm.freePages(pfn, 0);
            }
            bus.close();
            IommuAudit a = iommu.audit();
            stats.faults.add(a.faults());
            check(a.violationFree(), "no IOMMU violation (faults are expected, use-after-free and frees while mapped are not): " + a);
            check(a.liveMappings() == 0, "no mapping left: " + a);
            check(mm.totalFrames() == mm.freeFrames(), "every frame free: " + (mm.totalFrames() - mm.freeFrames()) + " in use");
            mm.close();
            check(died.isEmpty(), "the firmware thread threw nothing: " + died);
            check(bus.warnings().isEmpty(), "no BAR write handler threw: " + bus.warnings());
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    // ------------------------------------------------------------------ generators

    /** What a step does; each step draws its fields from its own seed, so a sample replays exactly. */
    enum Kind {
        // malformed entries and chains
        BAD_TYPE, BAD_INLEN, BAD_OUTLEN, IN_CHAIN, OUT_CHAIN, BOTH_CHAINS, WRONG_TOKEN, RAW_ENTRY, RAW_BLOCKS, DIRTY_ENTRY, HUGE, ZERO_AND_TINY,
        UNKNOWN_OPCODE, RANDOM_OP_MOD, RANDOM_INPUT,
        // valid-looking commands with random fields
        VALID, VALID_OBJECTS,
        // several entries on one doorbell; noise on the doorbell register and the UAR pages
        MULTI, DOORBELL_NOISE, UAR_NOISE,
        // one creating command many times: limits, firmware pages exhausted, parking
        FLOOD,
        // the driver's bug: a page the device uses unmapped under it
        UNMAP
    }

    record Step(Kind kind, long seed) {
    }

    static Arbitrary<List<Step>> steps(Arbitrary<Kind> kinds, int max) {
        return Combinators.combine(kinds, Arbitraries.longs()).as(Step::new).list().ofMinSize(1).ofMaxSize(max);
    }

    @Provide
    Arbitrary<List<Step>> malformed() {
        return steps(Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(3, Arbitraries.of(Kind.BAD_TYPE, Kind.BAD_INLEN, Kind.BAD_OUTLEN, Kind.WRONG_TOKEN, Kind.DIRTY_ENTRY)),
                net.jqwik.api.Tuple.of(6, Arbitraries.of(Kind.IN_CHAIN, Kind.OUT_CHAIN, Kind.BOTH_CHAINS)),
                net.jqwik.api.Tuple.of(3, Arbitraries.of(Kind.RAW_ENTRY, Kind.RAW_BLOCKS, Kind.RANDOM_INPUT)),
                net.jqwik.api.Tuple.of(2, Arbitraries.of(Kind.HUGE, Kind.ZERO_AND_TINY, Kind.UNKNOWN_OPCODE, Kind.RANDOM_OP_MOD)),
                net.jqwik.api.Tuple.of(2, Arbitraries.of(Kind.MULTI, Kind.DOORBELL_NOISE)),
                net.jqwik.api.Tuple.of(2, Arbitraries.of(Kind.VALID))), 8);
    }

    @Provide
    Arbitrary<List<Step>> commands() {
        return steps(Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(10, Arbitraries.of(Kind.VALID)),
                net.jqwik.api.Tuple.of(10, Arbitraries.of(Kind.VALID_OBJECTS)),
                net.jqwik.api.Tuple.of(2, Arbitraries.of(Kind.RANDOM_OP_MOD, Kind.RANDOM_INPUT, Kind.UNKNOWN_OPCODE)),
                net.jqwik.api.Tuple.of(2, Arbitraries.of(Kind.MULTI, Kind.UAR_NOISE, Kind.DOORBELL_NOISE)),
                net.jqwik.api.Tuple.of(1, Arbitraries.of(Kind.FLOOD, Kind.UNMAP))), 20);
    }

    // ------------------------------------------------------------------ the properties

    /**
     * Malformed entries and mailbox chains, raw random entries and blocks, unknown opcodes and
     * op_mods, huge and tiny lengths: each gets its delivery status (as the PRM's checks in order
     * predict) or a command status with a syndrome; the queue goes on.
     */
    @Property
    void malformedEntriesAndChainsGetTheirStatusAndTheQueueGoesOn(@ForAll @IntRange(min = 0, max = 5) int level,
            @ForAll("malformed") List<Step> steps) {
        current = "malformed";
        try {
            fuzz("malformed", level, steps);
        } catch (Throwable t) {
            failed = true;
            throw t;
        }
    }

    /**
     * Valid-looking commands (QUERY_HCA_CAP, QUERY_ISSI, MANAGE_PAGES with random counts and
     * addresses, CREATE_EQ/CQ/QP/MKEY with random contexts, modify/query/destroy of what exists, ...)
     * in random orders from a random starting level, with doorbell and UAR noise between them.
     */
    @Property
    void validLookingCommandsInRandomOrdersNeverHangOrKillTheFirmware(@ForAll @IntRange(min = 0, max = 5) int level,
            @ForAll("commands") List<Step> steps) {
        current = "commands";
        try {
            fuzz("commands", level, steps);
        } catch (Throwable t) {
            failed = true;
            throw t;
        }
    }

    static void fuzz(String property, int level, List<Step> steps) {
        Stats st = stats(property);
        long t0 = System.nanoTime();
        st.tries.increment();
        // every other try on a BlueField-3: DevX commands and uids executed, not BAD_OP
        int deviceId = (level + steps.size()) % 2 == 0 ? ConnectX4Device.DEVICE_CONNECTX4 : ConnectX4Device.DEVICE_BLUEFIELD3;
        Rig rig = new Rig(st, dir.resolve("swap-" + Thread.currentThread().threadId() + "-" + System.nanoTime()), (byte) 0x5a, deviceId);
        try {
            onRig(rig, () -> {
                rig.bringUp(level);
                for (Step s : steps) {
                    step(rig, s);
                    rig.stillGood();
                    if ((s.seed() & 3) != 0) {
                        rig.servePageRequests(); // else the request waits: the next commands may run short of pages
                    }
                }
            });
        } finally {
            st.tryNanos.add(System.nanoTime() - t0);
        }
    }

    /**
     * Runs {@code body} on {@code rig}, then closes the rig (its leak and audit checks) whatever
     * happened; the body's failure is thrown with the close's suppressed in it, or the close's.
     */
    static void onRig(Rig rig, Runnable body) {
        Throwable failure = null;
        try {
            body.run();
        } catch (Throwable t) {
            failure = t;
        } finally {
            try {
                rig.close();
            } catch (Throwable t) {
                if (failure == null) {
                    failure = t;
                } else {
                    failure.addSuppressed(t);
                }
            }
        }
        if (failure instanceof Error e) {
            throw e;
        }
        if (failure instanceof RuntimeException e) {
            throw e;
        }
        if (failure != null) {
            throw new AssertionError(failure);
        }
    }

    static int fuzzSlot(SplittableRandom r) {
        return r.nextInt(4) == 0 ? 0 : 3 + r.nextInt(29);
    }

    static void step(Rig rig, Step step) {
        SplittableRandom r = new SplittableRandom(step.seed());
        switch (step.kind()) {
            case MULTI -> {
                int n = 2 + r.nextInt(4);
                List<Spec> specs = new ArrayList<>();
                Set<Integer> slots = new java.util.HashSet<>();
                for (int i = 0; i < n; i++) {
                    int slot;
                    do {
                        slot = 3 + r.nextInt(29);
                    } while (!slots.add(slot));
                    Spec s = r.nextBoolean() ? valid(rig, slot, r, false) : malformed(rig, slot, Kind.values()[r.nextInt(Kind.RANDOM_INPUT.ordinal() + 1)], r);
                    specs.add(s);
                }
                specs.sort(Comparator.comparingInt(s -> s.slot));
                rig.run(specs, r);
            }
            case DOORBELL_NOISE -> {
                rig.stats.noise.increment();
                // every slot is software's now: a doorbell for any of them is ignored. Not for the
                // harness's slot: the NOP after this step is written only once the firmware went past
                // these doorbells (they are handled in order), so no entry is read while being written
                int noSync = ~(1 << SLOT_HARNESS);
                if (r.nextInt(4) == 0) { // the queue moved out of every mapping for a while: the entries are unreachable
                    rig.fn.write32be(0, InitSeg.CMDQ_ADDR_H, (int) (UNMAPPED >>> 32));
                    rig.fn.write32be(0, InitSeg.CMD_DBELL, r.nextInt() & noSync);
                    rig.fn.write32be(0, InitSeg.CMDQ_ADDR_H, (int) (rig.queue.iova() >>> 32));
                }
                rig.fn.write32be(0, InitSeg.CMD_DBELL, r.nextInt() & noSync);
                if (r.nextBoolean()) {
                    rig.fn.write32be(0, InitSeg.CMD_DBELL, 0);
                }
            }
            case UAR_NOISE -> uarNoise(rig, r);
            case UNMAP -> rig.unmapUnder(r);
            case FLOOD -> {
                int op = switch (r.nextInt(10)) {
                    case 0, 1, 2, 3 -> Mlx5Cmd.CREATE_EQ;
                    case 4 -> Mlx5Cmd.ALLOC_UAR;
                    case 5, 6 -> Mlx5Cmd.CREATE_CQ;
                    default -> Mlx5Cmd.CREATE_QP;
                };
                int n = op == Mlx5Cmd.ALLOC_UAR ? 200 + r.nextInt(60) : 8 + r.nextInt(40);
                for (int i = 0; i < n; i++) {
                    rig.run(build(rig, fuzzSlot(r), op, r), r);
                }
            }
            case VALID -> rig.run(valid(rig, fuzzSlot(r), r, false), r);
            case VALID_OBJECTS -> rig.run(valid(rig, fuzzSlot(r), r, true), r);
            default -> rig.run(malformed(rig, fuzzSlot(r), step.kind(), r), r);
        }
    }

    /** Writes on the UAR pages: EQ, CQ and BlueFlame doorbells for objects that exist and for none, and random words. */
    static void uarNoise(Rig rig, SplittableRandom r) {
        rig.stats.noise.increment();
        int n = 1 + r.nextInt(4);
        for (int i = 0; i < n; i++) {
            int uar = !rig.uars.isEmpty() && r.nextBoolean() ? pick(rig.uars, r) : Allocations.FIRST_UAR + r.nextInt(240);
            long base = (long) uar << 12;
            switch (r.nextInt(5)) {
                case 0 -> rig.fn.write32be(0, base + Eq.UAR_EQ_ARM_CI, (r.nextBoolean() && !rig.eqns.isEmpty() ? pick(rig.eqns, r) : r.nextInt(40)) << 24
                        | r.nextInt(1 << 24));
                case 1 -> rig.fn.write32be(0, base + Eq.UAR_EQ_CI, r.nextInt());
                case 2 -> {
                    int cqn = !rig.cqns.isEmpty() && r.nextBoolean() ? pick(rig.cqns, r) : r.nextInt(1 << 17);
                    long word = (long) r.nextInt() << 32 | cqn & 0xffff_ffffL;
                    rig.fn.write64(0, base + Cq.UAR_CQ_DOORBELL, Long.reverseBytes(word));
                }
                case 3 -> {
                    // a BlueFlame doorbell: for a QP of the fuzz, with its doorbell record and SQ made random first
                    FuzzQp q = rig.qps.isEmpty() ? null : rig.qps.values().stream().skip(r.nextInt(rig.qps.size())).findFirst().orElseThrow();
                    int qpn = q != null && r.nextInt(4) != 0 ? q.qpn() : r.nextInt(1 << 17);
                    if (q != null && qpn == q.qpn()) {
                        base = (long) q.uar() << 12;
                        q.dbr().mem().set(BE32, Qp.DBR_SND, r.nextInt(1 << 16));
                        for (Page p : q.buf()) {
                            if (r.nextBoolean()) {
                                byte[] junk = new byte[4096];
                                r.nextBytes(junk);
                                if (r.nextBoolean()) { // control segments that name the QP, so decoding goes past that check
                                    for (int o = 0; o < 4096; o += 64) {
                                        MemorySegment.ofArray(junk).set(BE32, o + Qp.CTRL_QPN_DS, qpn << 8 | 1 + r.nextInt(8));
                                    }
                                }
                                MemorySegment.copy(junk, 0, p.mem(), ValueLayout.JAVA_BYTE, 0, 4096);
                            }
                        }
                    }
                    rig.fn.write64(0, base + Qp.UAR_BF_OFFSET + 256L * r.nextInt(8), Long.reverseBytes((long) (qpn << 8 | 1) & 0xffff_ffffL));
                }
                default -> rig.fn.write64(0, base + (r.nextInt(512) << 3), r.nextLong());
            }
        }
    }

    static int pick(List<Integer> l, SplittableRandom r) {
        return l.get(r.nextInt(l.size()));
    }

    /** A reference to an object: one that exists most of the time, else a random or nearby number. */
    static int ref(List<Integer> l, SplittableRandom r, int bits) {
        int c = r.nextInt(10);
        if (c < 7 && !l.isEmpty()) {
            return pick(l, r);
        }
        if (c < 9) {
            return r.nextInt(8) + (l.isEmpty() ? 0 : pick(l, r));
        }
        return bits >= 32 ? r.nextInt() : r.nextInt(1 << bits);
    }

    /** A length near {@code natural}: exact most of the time, else 0, tiny, short, long, the limit, past it, negative. */
    static int length(int natural, SplittableRandom r) {
        return switch (r.nextInt(14)) {
            case 0 -> 0;
            case 1 -> 1 + r.nextInt(15);
            case 2 -> Math.max(0, natural - 1 - r.nextInt(Math.max(1, Math.min(natural, 600))));
            case 3 -> natural + 1 + r.nextInt(1200);
            case 4 -> CommandQueue.MAX_LENGTH;
            case 5 -> CommandQueue.MAX_LENGTH + 1 + r.nextInt(5000);
            case 6 -> r.nextInt();
            case 7 -> 16;
            default -> natural;
        };
    }

    static Spec malformed(Rig rig, int slot, Kind kind, SplittableRandom r) {
        Spec s = valid(rig, slot, r, r.nextBoolean());
        s.onOk = null; // whatever a malformed command created is not tracked
        s.what = kind.name();
        switch (kind) {
            case BAD_TYPE -> s.type = r.nextBoolean() ? r.nextInt(256) : r.nextInt(8);
            case BAD_INLEN -> s.inlen = length(s.inlen, r);
            case BAD_OUTLEN -> s.outlen = length(s.outlen, r);
            case IN_CHAIN -> {
                s.inFault = Fault.values()[1 + r.nextInt(Fault.values().length - 1)];
                s.inAt = r.nextInt(64);
                s.faultValue = r.nextLong();
                if (s.inlen <= 16 + 512 && r.nextBoolean()) {
                    s.inlen = 16 + 512 * (1 + r.nextInt(6)) - r.nextInt(512); // several blocks
                }
            }
            case OUT_CHAIN -> {
                s.outFault = Fault.values()[1 + r.nextInt(Fault.values().length - 1)];
                s.outAt = r.nextInt(64);
                s.faultValue = r.nextLong();
                if (s.outlen <= 16 + 512 && r.nextBoolean()) {
                    s.outlen = 16 + 512 * (1 + r.nextInt(6)) - r.nextInt(512);
                }
            }
            case BOTH_CHAINS -> {
                s.inFault = Fault.values()[r.nextInt(Fault.values().length)];
                s.outFault = Fault.values()[r.nextInt(Fault.values().length)];
                s.inAt = r.nextInt(64);
                s.outAt = r.nextInt(64);
                s.faultValue = r.nextLong();
                s.inlen = Math.max(s.inlen, 16 + r.nextInt(3000));
                s.outlen = Math.max(s.outlen, 16 + r.nextInt(3000));
            }
            case WRONG_TOKEN -> s.token = rig.token + 1 + r.nextInt(255);
            case RAW_ENTRY -> {
                s.rawEntry = new byte[CmdEntry.SIZE];
                r.nextBytes(s.rawEntry);
                MemorySegment e = MemorySegment.ofArray(s.rawEntry);
                if (r.nextBoolean()) { // random, but often enough past the descriptor checks to reach the executor
                    e.set(ValueLayout.JAVA_BYTE, CmdEntry.TYPE, (byte) CmdEntry.PCI_CMD_XPORT);
                    e.set(BE32, CmdEntry.INPUT_LENGTH, 16 + r.nextInt(r.nextBoolean() ? 64 : 5000));
                    e.set(BE32, CmdEntry.OUTPUT_LENGTH, 16 + r.nextInt(r.nextBoolean() ? 64 : 5000));
                    if (r.nextBoolean()) {
                        e.set(BE32, CmdEntry.IN, KNOWN[r.nextInt(KNOWN.length)] << 16 | r.nextInt(1 << 16));
                    }
                }
            }
            case RAW_BLOCKS -> {
                s.rawBlocks = true;
                s.inlen = Math.max(s.inlen, 16 + r.nextInt(2000));
            }
            case DIRTY_ENTRY -> s.dirtyEntry = true;
            case HUGE -> {
                int c = r.nextInt(4);
                if (c == 0 || c == 2) {
                    s.inlen = r.nextBoolean() ? CommandQueue.MAX_LENGTH - r.nextInt(600) : 256 * 1024 + r.nextInt(256 * 1024);
                }
                if (c == 1 || c == 2) {
                    s.outlen = r.nextBoolean() ? CommandQueue.MAX_LENGTH - r.nextInt(600) : 256 * 1024 + r.nextInt(256 * 1024);
                }
                if (c == 3) {
                    s.inlen = r.nextBoolean() ? Integer.MAX_VALUE : Integer.MIN_VALUE + r.nextInt(100);
                }
                if (r.nextInt(3) == 0) {
                    s.inFault = Fault.SHORT; // announced, not built
                    s.inAt = r.nextInt(1 << 20);
                }
            }
            case ZERO_AND_TINY -> {
                s.inlen = r.nextInt(17);
                s.outlen = r.nextInt(17);
            }
            case UNKNOWN_OPCODE -> {
                int op = r.nextBoolean() ? UNBUILT[r.nextInt(UNBUILT.length)] : r.nextInt(1 << 16);
                MemorySegment in = s.inSeg();
                in.set(BE32, 0, op << 16 | r.nextInt(1 << 16));
                in.set(BE32, 4, r.nextInt());
            }
            case RANDOM_OP_MOD -> s.inSeg().set(BE32, 4, r.nextBoolean() ? r.nextInt() : r.nextInt(8));
            case RANDOM_INPUT -> {
                byte[] junk = new byte[s.in.length];
                r.nextBytes(junk);
                System.arraycopy(junk, 8, s.in, 8, s.in.length - 8); // opcode and op_mod kept, the rest random
                if (r.nextBoolean()) {
                    s.inSeg().set(BE32, 4, junk[4]);
                }
            }
            default -> throw new IllegalArgumentException(kind.name());
        }
        return s;
    }

    /** A valid-looking command: a known opcode with fields drawn at random, references mostly to objects that exist. */
    static Spec valid(Rig rig, int slot, SplittableRandom r, boolean objects) {
        int[] pool = objects ? new int[] { Mlx5Cmd.CREATE_EQ, Mlx5Cmd.DESTROY_EQ, Mlx5Cmd.QUERY_EQ, Mlx5Cmd.GEN_EQE, Mlx5Cmd.CREATE_CQ, Mlx5Cmd.DESTROY_CQ,
                Mlx5Cmd.QUERY_CQ, Mlx5Cmd.CREATE_QP, Mlx5Cmd.DESTROY_QP, Qp.RST2INIT_QP, Qp.INIT2INIT_QP, Qp.INIT2RTR_QP, Qp.RTR2RTS_QP,
                Qp.RTS2RTS_QP, Qp.SQERR2RTS_QP, Qp.QP_2ERR, Qp.QP_2RST, Qp.QUERY_QP, Mlx5Cmd.CREATE_MKEY, Mlx5Cmd.DESTROY_MKEY, Mlx5Cmd.ALLOC_UAR,
                Mlx5Cmd.DEALLOC_UAR, Mlx5Cmd.ALLOC_PD, Mlx5Cmd.DEALLOC_PD, Mlx5Cmd.MANAGE_PAGES } : KNOWN;
        int opcode = pool[r.nextInt(pool.length)];
        Spec s = build(rig, slot, opcode, r);
        s.what = "valid " + s.what;
        return s;
    }

    static Spec build(Rig rig, int slot, int opcode, SplittableRandom r) {
        int opMod = r.nextInt(20) == 0 ? r.nextInt(1 << 16) : 0;
        Spec s;
        switch (opcode) {
            case Mlx5Cmd.ENABLE_HCA, Mlx5Cmd.DISABLE_HCA -> {
                s = new Spec(slot, opcode, opMod, 16, 16);
                if (r.nextInt(8) == 0) {
                    Pages.FUNCTION_ID.set(s.inSeg(), 0, r.nextInt(1 << 16));
                }
                if (r.nextInt(8) == 0) {
                    s.inSeg().set(BE32, 8, s.inSeg().get(BE32, 8) | 0x8000_0000);
                }
            }
            case Mlx5Cmd.QUERY_ISSI -> s = new Spec(slot, opcode, opMod, 16, r.nextInt(8) == 0 ? 16 + r.nextInt(0x70) : Mlx5Cmd.QUERY_ISSI_OUT_LEN);
            case Mlx5Cmd.SET_ISSI -> {
                s = new Spec(slot, opcode, opMod, 16, 16);
                s.inSeg().set(BE32, 8, r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(3));
            }
            case Mlx5Cmd.QUERY_PAGES -> {
                s = new Spec(slot, opcode, r.nextInt(6), 16, 16);
                if (r.nextInt(10) == 0) {
                    Pages.FUNCTION_ID.set(s.inSeg(), 0, 1 + r.nextInt(100));
                }
            }
            case Mlx5Cmd.MANAGE_PAGES -> s = managePages(rig, slot, r);
            case Mlx5Cmd.QUERY_HCA_CAP -> {
                int mod = switch (r.nextInt(6)) {
                    case 0 -> HcaCap.MODE_CUR;
                    case 1 -> HcaCap.MODE_MAX;
                    case 2 -> HcaCap.TYPE_ODP << 1;
                    case 3 -> HcaCap.TYPE_ROCE << 1 | 1;
                    case 4 -> r.nextInt(1 << 16);
                    default -> r.nextInt(2);
                };
                s = new Spec(slot, opcode, mod, 16, r.nextInt(6) == 0 ? 16 + r.nextInt(HcaCap.QUERY_OUT_LEN) : HcaCap.QUERY_OUT_LEN);
            }
            case Mlx5Cmd.SET_HCA_CAP -> {
                s = new Spec(slot, opcode, r.nextInt(4) == 0 ? r.nextInt(16) : HcaCap.TYPE_GENERAL << 1, HcaCap.SET_IN_LEN, 16);
                MemorySegment cap = s.inSeg();
                if (r.nextInt(4) == 0) {
                    byte[] junk = new byte[HcaCap.SIZE];
                    r.nextBytes(junk);
                    MemorySegment.copy(junk, 0, cap, ValueLayout.JAVA_BYTE, HcaCap.OFFSET, HcaCap.SIZE);
                } else {
                    HcaCap.LOG_MAX_QP.set(cap, HcaCap.OFFSET, r.nextInt(4) == 0 ? r.nextInt(32) : 18);
                    HcaCap.CACHE_LINE_128BYTE.set(cap, HcaCap.OFFSET, r.nextInt(2));
                    HcaCap.UAR_4K.set(cap, HcaCap.OFFSET, r.nextInt(2));
                    HcaCap.DRAIN_SIGERR.set(cap, HcaCap.OFFSET, r.nextInt(2));
                    HcaCap.CMDIF_CHECKSUM.set(cap, HcaCap.OFFSET, r.nextInt(8) == 0 ? r.nextInt(4) : 0);
                    HcaCap.PKEY_TABLE_SIZE.set(cap, HcaCap.OFFSET, r.nextInt(8) == 0 ? r.nextInt(8) : 0);
                    HcaCap.DCT.set(cap, HcaCap.OFFSET, r.nextInt(8) == 0 ? 1 : 0);
                }
            }
            case Mlx5Cmd.INIT_HCA -> s = new Spec(slot, opcode, opMod, 16, 16);
            case Mlx5Cmd.TEARDOWN_HCA -> {
                s = new Spec(slot, opcode, opMod, 16, 16);
                Pages.TEARDOWN_PROFILE.set(s.inSeg(), 0, r.nextInt(4) == 0 ? r.nextInt(1 << 16) : r.nextInt(3));
                s.onOk = () -> {
                    rig.uars.clear();
                    rig.pds.clear();
                    rig.eqns.clear();
                    rig.cqns.clear();
                    rig.qpns.clear();
                    rig.mkeys.clear();
                    rig.qps.clear();
                    rig.uids.clear();
                    rig.umems.clear();
                };
            }
            case Mlx5Cmd.SET_DRIVER_VERSION -> {
                s = new Spec(slot, opcode, opMod, Pages.SET_DRIVER_VERSION_IN_LEN, 16);
                byte[] v = new byte[Pages.DRIVER_VERSION_LEN];
                r.nextBytes(v);
                if (r.nextBoolean()) {
                    for (int i = 0; i < v.length; i++) {
                        v[i] = (byte) ('a' + (v[i] & 15));
                    }
                    v[r.nextInt(v.length)] = 0;
                }
                MemorySegment.copy(v, 0, s.inSeg(), ValueLayout.JAVA_BYTE, Pages.DRIVER_VERSION_IN, v.length);
            }
            case Mlx5Cmd.ALLOC_UAR -> {
                s = new Spec(slot, opcode, opMod, 16, 16);
                s.onOk = () -> rig.uars.add(Pages.INDEX24.get(rig.entryOut(slot), 0));
            }
            case Mlx5Cmd.ALLOC_PD -> {
                s = new Spec(slot, opcode, opMod, 16, 16);
                s.onOk = () -> rig.pds.add(Pages.INDEX24.get(rig.entryOut(slot), 0));
            }
            case Mlx5Cmd.DEALLOC_UAR, Mlx5Cmd.DEALLOC_PD, Mlx5Cmd.DESTROY_CQ, Mlx5Cmd.QUERY_CQ, Mlx5Cmd.DESTROY_QP, Qp.QP_2ERR, Qp.QP_2RST,
                    Qp.QUERY_QP, Mlx5Cmd.DESTROY_MKEY -> {
                List<Integer> l = switch (opcode) {
                    case Mlx5Cmd.DEALLOC_UAR -> rig.uars;
                    case Mlx5Cmd.DEALLOC_PD -> rig.pds;
                    case Mlx5Cmd.DESTROY_CQ, Mlx5Cmd.QUERY_CQ -> rig.cqns;
                    case Mlx5Cmd.DESTROY_MKEY -> rig.mkeys;
                    default -> rig.qpns;
                };
                int out = switch (opcode) {
                    case Mlx5Cmd.QUERY_CQ -> (int) Cq.CREATE_CQ_IN_PAS;
                    case Qp.QUERY_QP -> Qp.QUERY_OUT_LEN;
                    default -> 16;
                };
                s = new Spec(slot, opcode, opMod, 16, r.nextInt(10) == 0 ? 16 : out);
                int index = ref(l, r, 24);
                Pages.INDEX24.set(s.inSeg(), 0, index);
                if (opcode == Mlx5Cmd.DEALLOC_UAR || opcode == Mlx5Cmd.DEALLOC_PD || opcode == Mlx5Cmd.DESTROY_CQ || opcode == Mlx5Cmd.DESTROY_QP
                        || opcode == Mlx5Cmd.DESTROY_MKEY) {
                    s.onOk = () -> {
                        l.remove(Integer.valueOf(index));
                        if (opcode == Mlx5Cmd.DESTROY_QP) {
                            rig.qps.remove(index);
                        }
                    };
                }
            }
            case Mlx5Cmd.CREATE_EQ -> s = createEq(rig, slot, r);
            case Mlx5Cmd.DESTROY_EQ, Mlx5Cmd.QUERY_EQ, Mlx5Cmd.GEN_EQE -> {
                int len = opcode == Mlx5Cmd.GEN_EQE ? Eq.GEN_EQE_IN_LEN : 16;
                s = new Spec(slot, opcode, opMod, len, opcode == Mlx5Cmd.QUERY_EQ && r.nextInt(10) != 0 ? Eq.QUERY_EQ_OUT_LEN : 16);
                int eqn = ref(rig.eqns, r, 8);
                s.inSeg().set(ValueLayout.JAVA_BYTE, Eq.EQN_IN, (byte) eqn);
                if (opcode == Mlx5Cmd.GEN_EQE) {
                    byte[] eqe = new byte[Eq.EQE_SIZE];
                    r.nextBytes(eqe);
                    MemorySegment.copy(eqe, 0, s.inSeg(), ValueLayout.JAVA_BYTE, Eq.GEN_EQE_IN_EQE, Eq.EQE_SIZE);
                }
                if (opcode == Mlx5Cmd.DESTROY_EQ) {
                    s.onOk = () -> rig.eqns.remove(Integer.valueOf(eqn & 0xff));
                }
            }
            case Mlx5Cmd.CREATE_CQ -> s = createCq(rig, slot, r);
            case Mlx5Cmd.CREATE_UCTX, Mlx5Cmd.DESTROY_UCTX, Mlx5Cmd.CREATE_UMEM, Mlx5Cmd.DESTROY_UMEM, Mlx5Cmd.CREATE_GENERAL_OBJECT,
                    Mlx5Cmd.MODIFY_GENERAL_OBJECT, Mlx5Cmd.QUERY_GENERAL_OBJECT, Mlx5Cmd.DESTROY_GENERAL_OBJECT -> s = devx(rig, slot, opcode, r);
            case Mlx5Cmd.CREATE_QP -> {
                int logSq = r.nextInt(6) == 0 ? r.nextInt(16) : r.nextInt(5);
                int logRq = r.nextInt(6) == 0 ? r.nextInt(16) : r.nextInt(5);
                int logStride = r.nextInt(4);
                long bytes = ((1L << logRq) << 4 + logStride) + (64L << logSq);
                int npages = (int) ((bytes + 4095) / 4096);
                long[] pas = null;
                if (npages > 6 || r.nextInt(5) == 0) { // big buffers: page lists that point nowhere
                    pas = new long[Math.min(npages, 1 << 14)];
                    for (int i = 0; i < pas.length; i++) {
                        pas[i] = r.nextInt(8) == 0 ? r.nextLong() : UNMAPPED + 4096L * i;
                    }
                }
                int st = switch (r.nextInt(6)) {
                    case 0 -> Qp.ST_UD;
                    case 1 -> r.nextInt(256);
                    default -> Qp.ST_RC;
                };
                s = rig.createQp(slot, st, logSq, logRq, logStride, ref(rig.uars, r, 24), ref(rig.pds, r, 24), ref(rig.cqns, r, 24),
                        ref(rig.cqns, r, 24), pas);
                MemorySegment in = s.inSeg();
                long q = Qp.IN_QPC;
                switch (r.nextInt(12)) {
                    case 0 -> Qp.QPC_PM_STATE.set(in, q, r.nextInt(4));
                    case 1 -> Qp.QPC_RQ_TYPE.set(in, q, r.nextInt(8));
                    case 2 -> Qp.QPC_NO_SQ.set(in, q, 1);
                    case 3 -> Qp.QPC_LOG_PAGE_SIZE.set(in, q, r.nextInt(32));
                    case 4 -> Qp.QPC_PAGE_OFFSET.set(in, q, r.nextInt(64));
                    case 5 -> in.set(BE64, q + Qp.QPC_DBR_ADDR, r.nextBoolean() ? r.nextLong() : in.get(BE64, q + Qp.QPC_DBR_ADDR) + 1 + r.nextInt(7));
                    case 6 -> Qp.QPC_PRI_VHCA_PORT_NUM.set(in, q, r.nextInt(256));
                    case 7 -> in.set(BE64, Qp.CREATE_QP_IN_PAS, in.get(BE64, Qp.CREATE_QP_IN_PAS) | 1 + r.nextInt(4095));
                    default -> {
                    }
                }
                if (r.nextInt(10) == 0) {
                    s.inlen = length(s.inlen, r);
                }
            }
            case Qp.RST2INIT_QP, Qp.INIT2INIT_QP, Qp.INIT2RTR_QP, Qp.RTR2RTS_QP, Qp.RTS2RTS_QP, Qp.SQERR2RTS_QP -> {
                s = new Spec(slot, opcode, opMod, r.nextInt(10) == 0 ? 16 + r.nextInt(Qp.MODIFY_IN_LEN) : Qp.MODIFY_IN_LEN, 16);
                MemorySegment in = s.inSeg();
                Pages.INDEX24.set(in, 0, ref(rig.qpns, r, 24));
                long q = Qp.IN_QPC;
                if (s.in.length >= Qp.MODIFY_IN_LEN) {
                    if (r.nextInt(4) == 0) {
                        byte[] junk = new byte[Qp.QPC_SIZE];
                        r.nextBytes(junk);
                        MemorySegment.copy(junk, 0, in, ValueLayout.JAVA_BYTE, q, Qp.QPC_SIZE);
                    } else {
                        Qp.QPC_PRI_VHCA_PORT_NUM.set(in, q, r.nextInt(5) == 0 ? r.nextInt(256) : 1);
                        Qp.QPC_MTU.set(in, q, r.nextInt(5) == 0 ? r.nextInt(8) : 1 + r.nextInt(5));
                        Qp.QPC_REMOTE_QPN.set(in, q, ref(rig.qpns, r, 24));
                        Qp.QPC_PRI_RLID.set(in, q, r.nextInt(1 << 16));
                        Qp.QPC_PRI_GRH.set(in, q, r.nextInt(4) == 0 ? 1 : 0);
                        Qp.QPC_Q_KEY.set(in, q, r.nextInt());
                        Qp.QPC_RETRY_COUNT.set(in, q, r.nextInt(8));
                        Qp.QPC_RNR_RETRY.set(in, q, r.nextInt(8));
                        Qp.QPC_PRI_ACK_TIMEOUT.set(in, q, r.nextInt(32));
                        Qp.QPC_MIN_RNR_NAK.set(in, q, r.nextInt(32));
                        Qp.QPC_LOG_RRA_MAX.set(in, q, r.nextInt(8));
                        Qp.QPC_LOG_SRA_MAX.set(in, q, r.nextInt(8));
                        Qp.QPC_NEXT_SEND_PSN.set(in, q, r.nextInt(1 << 24));
                        Qp.QPC_NEXT_RCV_PSN.set(in, q, r.nextInt(1 << 24));
                        Qp.QPC_RRE.set(in, q, r.nextInt(2));
                        Qp.QPC_RWE.set(in, q, r.nextInt(2));
                        Qp.QPC_RAE.set(in, q, r.nextInt(2));
                        Qp.QPC_PRI_PKEY_INDEX.set(in, q, r.nextInt(4) == 0 ? r.nextInt(1 << 16) : 0);
                    }
                }
            }
            case Mlx5Cmd.CREATE_MKEY -> {
                int n = r.nextInt(6) == 0 ? r.nextInt(64) : 1 + r.nextInt(4);
                long[] mtt = new long[n];
                for (int i = 0; i < n; i++) {
                    mtt[i] = switch (r.nextInt(6)) {
                        case 0 -> UNMAPPED + 4096L * i;
                        case 1 -> r.nextLong() & ~0xfffL;
                        default -> rig.page().iova();
                    };
                }
                long start = r.nextInt(4) == 0 ? r.nextLong() : (long) r.nextInt(1 << 20);
                long len = switch (r.nextInt(8)) {
                    case 0 -> 0;
                    case 1 -> r.nextLong();
                    case 2 -> Long.MAX_VALUE - r.nextInt(4096);
                    case 3 -> 4096L * n + 1 + r.nextInt(8192);
                    default -> 1 + r.nextInt((int) Math.max(1, 4096L * n - (start & 0xfff)));
                };
                s = rig.createMkey(slot, ref(rig.pds, r, 24), start, len, mtt, r.nextInt(8) != 0);
                MemorySegment in = s.inSeg();
                long m = Mkey.CREATE_IN_MKC;
                switch (r.nextInt(10)) {
                    case 0 -> Mkey.MKC_ACCESS_MODE_1_0.set(in, m, r.nextInt(4));
                    case 1 -> Mkey.MKC_ACCESS_MODE_4_2.set(in, m, r.nextInt(8));
                    case 2 -> Mkey.MKC_FREE.set(in, m, 1);
                    case 3 -> Mkey.MKC_LOG_PAGE_SIZE.set(in, m, r.nextInt(64));
                    case 4 -> in.set(BE32, Mkey.CREATE_IN_OCTWORD_ACTUAL_SIZE, r.nextInt());
                    case 5 -> Mkey.MKC_MKEY_7_0.set(in, m, r.nextInt(256));
                    default -> {
                    }
                }
            }
            case Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT, Mlx5Cmd.QUERY_HCA_VPORT_GID -> {
                boolean ctx = opcode == Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT;
                s = new Spec(slot, opcode, opMod, 16, r.nextInt(10) == 0 ? 16 : ctx ? Vport.CONTEXT_OUT_LEN : Vport.GID_OUT_LEN);
                Vport.IN_PORT_NUM.set(s.inSeg(), 0, r.nextInt(4) == 0 ? r.nextInt(16) : 1);
                if (!ctx) {
                    Vport.IN_GID_INDEX.set(s.inSeg(), 0, r.nextInt(4) == 0 ? r.nextInt(1 << 16) : 0);
                }
            }
            default -> s = new Spec(slot, opcode, opMod, 16, 16); // NOP
        }
        if (!rig.uids.isEmpty() && r.nextInt(8) == 0 && s.in.length >= 4) {
            // a uid in the header: a live user context's mostly, any number sometimes (the firmware checks it, and ownership)
            org.peerdirect.hca.cx4.ifc.Devx.UID.set(s.inSeg(), 0, r.nextInt(4) == 0 ? r.nextInt(1 << 16) : rig.uids.get(r.nextInt(rig.uids.size())));
            s.onOk = null; // what it made belongs to that uid: the harness's lists keep the kernel's objects
        }
        if (s.what.isEmpty()) {
            s.what = opName(opcode);
        }
        return s;
    }

    /**
     * A DevX command (BlueField-3): user contexts, umems over the rig's pages (sometimes too few,
     * unmapped, not present), general objects of random types and ids (the dispatcher refuses every
     * type no one registered).
     */
    static Spec devx(Rig rig, int slot, int opcode, SplittableRandom r) {
        org.peerdirect.hca.cx4.ifc.IfcField uidField = org.peerdirect.hca.cx4.ifc.Devx.UID;
        Spec s;
        switch (opcode) {
            case Mlx5Cmd.CREATE_UCTX -> {
                s = new Spec(slot, opcode, 0, r.nextInt(8) == 0 ? 16 : org.peerdirect.hca.cx4.ifc.Devx.CREATE_UCTX_IN_LEN, 16);
                s.onOk = () -> rig.uids.add(org.peerdirect.hca.cx4.ifc.Devx.CREATE_UCTX_OUT_UID.get(rig.entryOut(slot), 0));
            }
            case Mlx5Cmd.DESTROY_UCTX -> {
                s = new Spec(slot, opcode, 0, 16, 16);
                int uid = ref(rig.uids, r, 16);
                org.peerdirect.hca.cx4.ifc.Devx.DESTROY_UCTX_IN_UID.set(s.inSeg(), 0, uid);
                s.onOk = () -> rig.uids.remove(Integer.valueOf(uid));
            }
            case Mlx5Cmd.CREATE_UMEM -> {
                int n = 1 + r.nextInt(4);
                s = new Spec(slot, opcode, 0, (int) org.peerdirect.hca.cx4.ifc.Devx.UMEM_MTT + 8 * n, 16);
                MemorySegment in = s.inSeg();
                in.set(BE64, org.peerdirect.hca.cx4.ifc.Devx.UMEM_NUM_OF_MTT, r.nextInt(10) == 0 ? r.nextLong() : n);
                in.set(BE32, org.peerdirect.hca.cx4.ifc.Devx.UMEM_PAGE_OFFSET, r.nextInt(4) == 0 ? r.nextInt(8192) : 0);
                org.peerdirect.hca.cx4.ifc.Devx.UMEM_LOG_PAGE_SIZE.set(in, 0, r.nextInt(10) == 0 ? r.nextInt(32) : 0);
                for (int i = 0; i < n; i++) {
                    long page = r.nextInt(8) == 0 ? UNMAPPED + 4096L * i : rig.page().iova();
                    in.set(BE64, org.peerdirect.hca.cx4.ifc.Devx.UMEM_MTT + 8L * i, page | (r.nextInt(8) == 0 ? 0 : Mkey.MTT_READ | Mkey.MTT_WRITE));
                }
                s.onOk = () -> rig.umems.add(org.peerdirect.hca.cx4.ifc.Devx.UMEM_ID.get(rig.entryOut(slot), 0));
            }
            case Mlx5Cmd.DESTROY_UMEM -> {
                s = new Spec(slot, opcode, 0, 16, 16);
                int id = ref(rig.umems, r, 24);
                org.peerdirect.hca.cx4.ifc.Devx.UMEM_ID.set(s.inSeg(), 0, id);
                s.onOk = () -> rig.umems.remove(Integer.valueOf(id));
            }
            default -> { // the general-object commands: obj_type where op_mod is
                if (r.nextInt(3) > 0 && rig.dev.hasDpa()) {
                    s = DpaCommandFuzz.command(rig, slot, opcode, r);
                    break;
                }
                int type = r.nextInt(3) == 0 ? r.nextInt(1 << 16) : 0x28 + r.nextInt(0x12);
                s = new Spec(slot, opcode, type, 16 + r.nextInt(64), 16 + r.nextInt(64));
                s.inSeg().set(BE32, org.peerdirect.hca.cx4.ifc.Devx.OBJ_ID, r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(8));
                byte[] junk = new byte[s.in.length - 16];
                r.nextBytes(junk);
                MemorySegment.copy(junk, 0, s.inSeg(), ValueLayout.JAVA_BYTE, 16, junk.length);
            }
        }
        if (!rig.uids.isEmpty() && r.nextInt(3) == 0) {
            uidField.set(s.inSeg(), 0, rig.uids.get(r.nextInt(rig.uids.size())));
        }
        s.what = opName(s.opcode()); // the DPA fuzz may have made it a CREATE
        return s;
    }

    static Spec managePages(Rig rig, int slot, SplittableRandom r) {
        int c = r.nextInt(10);
        if (c < 5) { // GIVE
            int n = r.nextInt(8) == 0 ? r.nextInt(70) : 1 + r.nextInt(8);
            long[] pas = new long[n];
            for (int i = 0; i < n; i++) {
                pas[i] = switch (r.nextInt(12)) {
                    case 0 -> UNMAPPED + 4096L * r.nextInt(1 << 16);
                    case 1 -> i > 0 ? pas[r.nextInt(i)] : rig.page().iova(); // the same page twice
                    case 2 -> rig.page().iova() + 8 * (1 + r.nextInt(511)); // not 4 KiB aligned
                    case 3 -> rig.given.isEmpty() ? rig.page().iova() : rig.given.get(r.nextInt(rig.given.size())); // already held
                    case 4 -> r.nextLong();
                    default -> rig.page().iova();
                };
            }
            Spec s = rig.give(slot, pas);
            if (r.nextInt(8) == 0) { // num_entries disagrees with the list
                s.inSeg().set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, r.nextBoolean() ? n + 1 + r.nextInt(100) : r.nextInt());
            }
            s.what = "GIVE " + n;
            return s;
        }
        if (c < 8) { // TAKE
            int n = r.nextInt(4) == 0 ? r.nextInt() : r.nextInt(70);
            int room = r.nextInt(70);
            Spec s = new Spec(slot, Mlx5Cmd.MANAGE_PAGES, Pages.MANAGE_TAKE, 16, (int) Pages.MANAGE_OUT_PAS + 8 * room);
            s.inSeg().set(BE32, Pages.MANAGE_IN_NUM_ENTRIES, n);
            s.what = "TAKE " + n + " into " + room;
            return s;
        }
        Spec s = new Spec(slot, Mlx5Cmd.MANAGE_PAGES, c == 8 ? Pages.MANAGE_CANT_GIVE : r.nextInt(1 << 16), 16, 16);
        s.what = c == 8 ? "CANT_GIVE" : "op_mod";
        return s;
    }

    static Spec createEq(Rig rig, int slot, SplittableRandom r) {
        int logSize = r.nextInt(8) == 0 ? r.nextInt(32) : r.nextInt(7);
        long bytes = (long) Eq.EQE_SIZE << logSize;
        int npages = (int) Math.min(1 << 16, (bytes + 4095) / 4096);
        long[] pas = new long[npages];
        for (int i = 0; i < npages; i++) {
            pas[i] = npages <= 4 && r.nextInt(4) != 0 ? rig.page().iova() : UNMAPPED + 4096L * i;
        }
        Spec s = new Spec(slot, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8 * npages, 16);
        MemorySegment in = s.inSeg();
        long c = Eq.CREATE_EQ_IN_EQC;
        Eq.EQC_LOG_EQ_SIZE.set(in, c, logSize);
        Eq.EQC_UAR_PAGE.set(in, c, ref(rig.uars, r, 24));
        Eq.EQC_INTR.set(in, c, r.nextInt(6) == 0 ? r.nextInt(1 << 12) : r.nextInt(64));
        if (r.nextInt(10) == 0) {
            Eq.EQC_LOG_PAGE_SIZE.set(in, c, r.nextInt(32));
        }
        long mask = r.nextLong();
        if (r.nextInt(6) != 0) {
            mask &= ~(1L << Eq.EVENT_PAGE_REQUEST); // page requests (and parking) sometimes
        }
        in.set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, mask);
        for (int i = 0; i < npages; i++) {
            in.set(BE64, Eq.CREATE_EQ_IN_PAS + 8L * i, pas[i] | (r.nextInt(20) == 0 ? 1 + r.nextInt(4095) : 0));
        }
        if (r.nextInt(10) == 0) {
            s.inlen = length(s.inlen, r);
        }
        s.onOk = () -> {
            rig.eqns.add(rig.entryOut(slot).get(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN) & 0xff);
            rig.stats.eqsCreated.increment();
        };
        return s;
    }

    static Spec createCq(Rig rig, int slot, SplittableRandom r) {
        int logSize = r.nextInt(8) == 0 ? r.nextInt(32) : r.nextInt(8);
        long bytes = (long) Cq.CQE_SIZE << Math.min(24, logSize);
        int npages = (int) ((bytes + 4095) / 4096);
        int listed = Math.min(npages, 1 << 16);
        Spec s = new Spec(slot, Mlx5Cmd.CREATE_CQ, 0, (int) Cq.CREATE_CQ_IN_PAS + 8 * listed, 16);
        MemorySegment in = s.inSeg();
        long c = Cq.CREATE_CQ_IN_CQC;
        Cq.CQC_LOG_CQ_SIZE.set(in, c, logSize);
        Cq.CQC_UAR_PAGE.set(in, c, ref(rig.uars, r, 24));
        Cq.CQC_C_EQN.set(in, c, ref(rig.eqns, r, 32));
        switch (r.nextInt(10)) {
            case 0 -> Cq.CQC_CQE_SZ.set(in, c, r.nextInt(8));
            case 1 -> Cq.CQC_LOG_PAGE_SIZE.set(in, c, r.nextInt(32));
            case 2 -> Cq.CQC_PAGE_OFFSET.set(in, c, r.nextInt(64));
            default -> {
            }
        }
        long dbr = switch (r.nextInt(8)) {
            case 0 -> r.nextLong();
            case 1 -> UNMAPPED;
            case 2 -> rig.page().iova() + 1 + r.nextInt(7);
            default -> rig.page().iova() + 8L * r.nextInt(512);
        };
        in.set(BE64, c + Cq.CQC_DBR_ADDR, dbr);
        for (int i = 0; i < listed; i++) {
            in.set(BE64, Cq.CREATE_CQ_IN_PAS + 8L * i, listed <= 4 && r.nextInt(4) != 0 ? rig.page().iova() : UNMAPPED + 4096L * i);
        }
        if (r.nextInt(10) == 0) {
            s.inlen = length(s.inlen, r);
        }
        s.onOk = () -> rig.cqns.add(Pages.INDEX24.get(rig.entryOut(slot), 0));
        return s;
    }

    // ------------------------------------------------------------------ a defect the fuzz reached, as a plain example

    /**
     * DEFECT (fails): a command parked for firmware pages whose page request was lost never comes
     * back. The fuzz reaches this through EQs of its own that take page requests ("parked past 200 ms"
     * in the summary; the harness then gives pages unasked, which re-runs the parked command); here
     * the driver is well behaved but for reading its page-request EQ a little late.
     *
     * <p>The driver's page-request EQ has one entry and also takes command-completion events; it is
     * full when the firmware runs short of context space. {@code Firmware.requestPages} then records
     * the request as outstanding ({@code FirmwarePages.request}: {@code requested = n}) before
     * {@code postEvent} drops the EQE on the full ring ({@code HwEq.post}: overrun); the next command
     * short of pages is parked ({@code ConnectX4Device.run}: {@code mayDefer = canRequestPages() &&
     * !refused()}, and {@code Firmware.canRequestPages} only asks whether an EQ subscribed, not whether
     * the request reached it, against {@code mayDefer}'s contract "false when no page request can be
     * delivered"). Once the driver has emptied its EQ nothing more comes: {@code FirmwarePages.request}
     * returns 0 while {@code requested != 0}, so the request is never sent again, and the parked
     * command (and every later doorbell for its slot, skipped while it is parked) waits for a
     * MANAGE_PAGES the driver has no reason to send: a hang of the command interface.
     */
    @net.jqwik.api.Example
    void aPageRequestLostOnAFullEqIsRaisedAgainAndTheParkedCommandComesBack() {
        Stats st = stats("defect-example");
        Rig rig = new Rig(st, dir.resolve("swap-example-" + System.nanoTime()), (byte) 0x5a);
        onRig(rig, () -> {
            rig.bringUp(3);
            // the driver's page-request EQ: one entry, command completions too
            Page ring = rig.page();
            for (long off = Eq.EQE_OWNER; off < 4096; off += Eq.EQE_SIZE) {
                ring.mem().set(ValueLayout.JAVA_BYTE, off, (byte) 1);
            }
            Spec eq = new Spec(SLOT_HARNESS, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8, 16);
            Eq.EQC_LOG_EQ_SIZE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, 0);
            Eq.EQC_UAR_PAGE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, rig.uars.get(0));
            eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, 1L << Eq.EVENT_PAGE_REQUEST | 1L << Eq.EVENT_CMD);
            eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_PAS, ring.iova());
            int eqn = rig.ok(eq).outHeader().get(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN) & 0xff;
            // EQs until the firmware's context space runs out: the page request meets a full EQ
            rig.giveWhenParked = false;
            Spec parked = null;
            for (int i = 0; i < 31 && parked == null; i++) {
                Spec c = new Spec(3, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8, 16);
                Eq.EQC_LOG_EQ_SIZE.set(c.inSeg(), Eq.CREATE_EQ_IN_EQC, 0);
                Eq.EQC_UAR_PAGE.set(c.inSeg(), Eq.CREATE_EQ_IN_EQC, rig.uars.get(0));
                c.inSeg().set(BE64, Eq.CREATE_EQ_IN_PAS, rig.page().iova());
                rig.mailboxCursor = 0;
                rig.write(c, new SplittableRandom(i));
                rig.fn.write32be(0, InitSeg.CMD_DBELL, 1 << c.slot);
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                while (rig.owned(c.slot) && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                if (rig.owned(c.slot)) {
                    parked = c; // parked for pages (the firmware still runs other commands)
                } else {
                    check(rig.outcome(c.slot).ok(), "EQ " + i + " created: " + rig.dev.lastRefusal());
                }
            }
            check(parked != null, "the firmware ran short of context space: " + rig.dev.describe());
            // now the driver reads its EQ (consumer index to the doorbell) and answers every page request in it
            rig.prRing = ring;
            rig.prLog = 0; // the one-entry EQ made above
            rig.prUar = rig.uars.get(0);
            rig.prEqn = eqn;
            rig.stillGood();
            rig.waitFor(parked); // 10 s: the command must come back, with pages asked again and given, or NO_RES
            Outcome o = rig.outcome(parked.slot);
            check(o.delivery() == CmdEntry.DELIVERY_OK, "the parked command delivered");
        });
    }

    // ------------------------------------------------------------------ coverage assertions

    /** The property that ran in this instance (jqwik makes one per property). */
    String current;

    /** A try of this property failed (shrinking runs more): the variety is then reported, not asserted. */
    boolean failed;

    @AfterProperty
    void varietyReached() {
        String key = current;
        if (key == null || !STATS.containsKey(key)) {
            return;
        }
        Stats s = STATS.get(key);
        System.out.println(s.summary());
        System.out.println("  (opcode, status, syndrome) reached: " + s.outcomes.entrySet().stream()
                .map(e -> e.getKey() + " x" + e.getValue().sum()).collect(Collectors.joining("; ")));
        long tries = s.tries.sum();
        if (tries < 100 || failed) {
            return; // a handful of tries (a seed rerun, a -Djqwik.tries=10 smoke run) proves no variety
        }
        if (key.equals("malformed")) {
            // every delivery status the model produces: OK, token, block number, both alignments, both lengths, descriptor
            check(s.deliveries.size() >= 8, "the malformed fuzz reached every delivery status the model gives: " + s.deliveries.keySet());
            check(s.statuses.size() >= 6, "the malformed fuzz reached command statuses: " + s.statuses);
            check(s.oracleChecked.sum() > s.commands.sum() / 2, "most malformed entries decided by the oracle: " + s.summary());
        } else {
            check(s.statuses.size() >= 9, "the command fuzz reached command statuses: " + s.statuses);
            check(s.syndromes.size() >= 14, "the command fuzz reached syndromes: " + s.syndromes);
            check(s.outcomes.size() >= 80, "the command fuzz reached (opcode, status, syndrome) triples: " + s.outcomes.size());
            check(s.opcodesDelivered.size() >= 35, "the command fuzz delivered most opcodes: " + s.opcodesDelivered.size());
            check(s.qpsCreated.sum() > 0 && s.eqsCreated.sum() > 0, "the command fuzz created EQs and QPs: " + s.summary());
            check(s.deepestLevel.get() == 5, "every bring-up level tried");
            check(s.pageRequests.sum() > 0, "page requests answered: " + s.summary());
            long dpaRefusals = s.outcomes.entrySet().stream().filter(e -> e.getKey().contains("synd=0x0bad03"))
                    .mapToLong(e -> e.getValue().sum()).sum();
            check(s.dpaObjects.sum() + dpaRefusals > 0, "DPA object commands reached the DPA types (created, or refused with a DPA syndrome): "
                    + s.summary());
        }
    }
}
