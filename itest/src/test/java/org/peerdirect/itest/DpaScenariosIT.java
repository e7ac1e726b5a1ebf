package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.peerdirect.itest.dpa.ScenarioDev.W_HADDR;
import static org.peerdirect.itest.dpa.ScenarioDev.W_MKEY;
import static org.peerdirect.itest.dpa.ScenarioDev.W_READY;
import static org.peerdirect.itest.dpa.ScenarioDev.W_SEEN;
import static org.peerdirect.itest.dpa.ScenarioDev.W_SIZE;
import static org.peerdirect.itest.dpa.ScenarioDev.W_WINDOW;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Hashtable;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.ProbeBuilder;
import org.ops4j.pax.exam.TestProbeBuilder;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.BundleContext;
import org.osgi.service.cm.ConfigurationAdmin;
import org.peerdirect.flexio.FlexioCq;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioMkey;
import org.peerdirect.flexio.FlexioMsgStream;
import org.peerdirect.flexio.FlexioOutbox;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioQp;
import org.peerdirect.flexio.FlexioStatus;
import org.peerdirect.flexio.FlexioWindow;
import org.peerdirect.hca.dpaview.DpaView;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.itest.dpa.ScenarioDevStubs;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.mlx5.dv.Mlx5dv;

/**
 * DPA_MODEL.md §4 scenarios 1–4 in the container, on its BlueField-3 ({@code mlx5_2}) through the
 * real bundles (mlx5_core/mlx5_ib, DevX, FlexIO), each with its mutant that must fail: (1) FlexIO
 * RPC with its line on a SYNC stream, and a device {@code flexio_dev_error} the host sees as a
 * USER_ERROR; (2) the echo handler over RC ({@code dpa:sample echo}, bursts racing the arm) and
 * its missing write-back ({@code dpa:sample fence}); (3) a window into host memory: write-back,
 * read-invalidate polling, the C3 and C4 mutants, an mkey of another PD refused, the mkey destroyed under a
 * spinning writer (no DMA after the destroy returned), and a peer invalidation of a GPU MR under a spinning
 * writer (no DMA after the free callback returned); (4) a doorbell on another process's QP
 * (dropped, the ringer's process error, the other unaffected) and {@code kernel:kill} of a process
 * whose thread spins with a window configured. Each ends with no DPA process or thread left, no EU
 * busy, the BlueField-3's firmware pages back, every process exited with no page pinned, and no
 * IOMMU violation.
 * The device code is {@link org.peerdirect.itest.dpa.ScenarioDev}, built by dpacc into the probe.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DpaScenariosIT {

    static final String BF3 = "mlx5_2";
    static final FlexioProcess.Attr ATTR = new FlexioProcess.Attr(64 * 1024, Duration.ofSeconds(30));
    static final long WAIT_NANOS = 30_000_000_000L;

    @Inject
    IbvDeviceList devices;
    @Inject
    Mm mm;
    @Inject
    Iommu iommu;
    @Inject
    DpaView dpaView;
    @Inject
    CommandProcessor processor;
    @Inject
    BundleContext context;

    /** The probe runs Gogo commands (dpa:sample, dpa:crash, mlx5:pages, kernel:kill). */
    @ProbeBuilder
    public TestProbeBuilder probe(TestProbeBuilder builder) {
        return Distribution.withGogo(builder);
    }

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    // ---------------------------------------------------------------- scenario 1

    @Test
    public void scenario1FlexioRpcAndADeviceErrorSeenAsAUserError() throws Exception {
        Baseline b = baseline();
        AddressSpace p = process("itest-dpa-rpc");
        try (IbvContext ctx = devices.device(BF3).open(p)) {
            FlexioProcess fp = FlexioProcess.create(ctx, ScenarioDevStubs.APP, ATTR);
            try {
                List<String> lines = Collections.synchronizedList(new ArrayList<>());
                FlexioMsgStream s = FlexioMsgStream.create(fp, new FlexioMsgStream.Attr(2048, FlexioMsgStream.SyncMode.SYNC, "default", 4),
                        lines::add);
                assertEquals(42, fp.call(ScenarioDevStubs.RPC_CALCULATE, 40L, 2L, s.daddr()));
                await("the SYNC stream printed the device's line", () -> !lines.isEmpty());
                assertEquals(List.of("rpc_calculate: 40 + 2 = 42"), lines);
                assertEquals(FlexioStatus.ERR_NO_ERROR, fp.errStatusGet());
                s.destroy();
                // the mutant: flexio_dev_error(0x90)
                FlexioException e = assertThrows(FlexioException.class, () -> fp.call(ScenarioDevStubs.RPC_FAIL, 0x90));
                assertTrue(e.getMessage(), e.getMessage().contains("0x90"));
                assertEquals(FlexioStatus.ERR_USER_ERROR, fp.errStatusGet());
                assertEquals(0x90, fp.processStatus());
                assertTrue("the error fd became readable", fp.errHandlerFdReadable(Duration.ofSeconds(10)));
                String crash = run("dpa:crash");
                assertTrue(crash, crash.contains("process " + fp.id() + " ") && crash.contains("status 0x90 (user error)")
                        && crash.contains("ScenarioDev.fail"));
            } finally {
                fp.destroy();
            }
        } finally {
            p.exit();
        }
        assertClean(b);
    }

    // ---------------------------------------------------------------- scenario 2

    @Test
    public void scenario2EchoOverRcWithBurstsRacingTheArmAndTheMissingWriteback() throws Exception {
        Baseline b = baseline();
        String out = run("dpa:sample echo -d " + BF3 + " -n 32");
        for (int i = 0; i < 32; i++) {
            assertTrue("message " + i + ":\n" + out, out.contains("sent \"msg-" + i + "-echo\"  came back \"MSG-" + i + "-ECHO\""));
        }
        Matcher m = Pattern.compile("32 of 32 messages echoed in order; echo_count 32, handler activations (\\d+); FLEXIO_ERR_STATUS_NO_ERROR")
                .matcher(out);
        assertTrue(out, m.find());
        int activations = Integer.parseInt(m.group(1));
        assertTrue("activations " + activations + " of 32 messages", activations >= 1 && activations <= 32);
        assertClean(b);
        String fence = run("dpa:sample fence -d " + BF3);
        assertTrue(fence, fence.contains("no echo came back") && fence.contains("FLEXIO_ERR_STATUS_FATAL_ERROR"));
        assertTrue(fence, fence.contains("C1 thread") && fence.contains("without __dpa_thread_memory_writeback before the doorbell")
                && fence.contains("(called from org.peerdirect.dpa.samples.dev.EchoDev."));
        assertClean(b);
    }

    // ---------------------------------------------------------------- scenario 3

    /** A window handler's argument in the heap: window, mkey, host address (the rest zero). */
    static long windowArg(FlexioProcess fp, int window, int mkey, long haddr) {
        ByteBuffer a = ByteBuffer.allocate(W_SIZE).order(ByteOrder.LITTLE_ENDIAN);
        a.putLong(W_WINDOW, window).putLong(W_MKEY, mkey).putLong(W_HADDR, haddr);
        long d = fp.copyFromHost(a.array());
        assertTrue("heap for a window argument", d != 0);
        return d;
    }

    /** A handler on {@code func} with {@code arg}, run and activated by the device ({@code flexio_dev_event_handler_activate}). */
    static FlexioEventHandler started(FlexioProcess fp, org.peerdirect.flexio.FlexioFunc func, long arg) {
        FlexioEventHandler h = FlexioEventHandler.create(fp, FlexioEventHandler.Attr.of(func, arg));
        h.run();
        assertEquals(0, fp.call(ScenarioDevStubs.RPC_ACTIVATE, h.id()));
        return h;
    }

    @Test
    public void scenario3AWindowIntoHostMemory() throws Exception {
        Baseline b = baseline();
        AddressSpace p = process("itest-dpa-window");
        try (IbvContext ctx = devices.device(BF3).open(p)) {
            long host = p.mmap(3 * 4096);
            p.populate(host, 3 * 4096, true);
            FlexioProcess fp = FlexioProcess.create(ctx, ScenarioDevStubs.APP, ATTR);
            IbvPd otherPd = ctx.allocPd();
            IbvMr otherMr = otherPd.regMr(host, 4096, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ);
            try {
                FlexioMkey mkey = FlexioMkey.hostMkeyCreate(fp, host, 4096);
                FlexioWindow w = FlexioWindow.create(fp, fp.pdn());
                // write-back: the device's store reaches host memory through the mkey and the IOMMU
                assertEquals(0, fp.call(ScenarioDevStubs.WINDOW_WRITE, windowArg(fp, w.id(), mkey.id(), host), 0xffL));
                assertEquals(0xff, p.readLong(host));
                // read-invalidate: a handler polls a host flag until the host sets it
                long poll = windowArg(fp, w.id(), mkey.id(), host + 8);
                started(fp, ScenarioDevStubs.POLL_FLAG, poll);
                p.writeLong(host + 8, 0x5a);
                await("the polling handler saw the host's flag", () -> fp.call(ScenarioDevStubs.RPC_READ, poll + W_SEEN) == 0x5a);
                // an mkey of another PD (a verbs MR of the same memory) is refused at configuration, nothing written
                long refused = fp.call(ScenarioDevStubs.WINDOW_WRITE, windowArg(fp, w.id(), otherMr.lkey(), host + 16), 0x77L);
                assertTrue("window_config with another PD's mkey failed: 0x" + Long.toHexString(refused), refused >= 0x100);
                assertEquals(0, p.readLong(host + 16));
                assertEquals(FlexioStatus.ERR_NO_ERROR, fp.errStatusGet());
                // the mkey destroyed under a writer that spins with the window configured: no DMA after the destroy returned
                FlexioMkey spinKey = FlexioMkey.hostMkeyCreate(fp, host + 4096, 4096);
                long spin = windowArg(fp, w.id(), spinKey.id(), host + 4096);
                started(fp, ScenarioDevStubs.SPIN_WINDOW, spin);
                await("the spinning writer reached host memory", () -> p.readLong(host + 4096) >= 10);
                long faults = iommu.audit().faults();
                spinKey.destroy();
                long atDestroy = p.readLong(host + 4096);
                await("the writer's next access faulted", () -> fp.errStatusGet() == FlexioStatus.ERR_FATAL_ERROR);
                assertEquals("no window DMA after the mkey's destroy returned", atDestroy, p.readLong(host + 4096));
                assertEquals("refused at the mkey, before the IOMMU", faults, iommu.audit().faults());
                String crash = run("dpa:crash");
                assertTrue(crash, crash.contains("process " + fp.id() + " ") && crash.contains("ScenarioDev.spinWindow"));
            } finally {
                fp.destroy();
                otherMr.dereg();
                otherPd.dealloc();
            }
            // the mutant: a window store never written back (C3) never reaches the host, and strict ends the process
            try (FlexioProcess c3 = FlexioProcess.create(ctx, ScenarioDevStubs.APP, ATTR)) {
                FlexioMkey mkey = FlexioMkey.hostMkeyCreate(c3, host + 8192, 4096);
                FlexioWindow w = FlexioWindow.create(c3, c3.pdn());
                long arg = windowArg(c3, w.id(), mkey.id(), host + 8192);
                try {
                    c3.call(ScenarioDevStubs.WINDOW_WRITE_NO_WRITEBACK, arg, 0xeeL);
                } catch (FlexioException expected) {
                    // strict: the activation's end ends the process; the call may see it
                }
                await("C3 ended the process", () -> c3.errStatusGet() == FlexioStatus.ERR_FATAL_ERROR);
                assertEquals("the store never reached the host", 0, p.readLong(host + 8192));
                String mm = run("dpa:mm");
                assertTrue(mm, mm.contains("process " + c3.id() + ":") && mm.contains("C3") && mm.contains("ScenarioDev.windowWriteNoWriteback"));
            }
            // the mutant: polling the flag without read-invalidate sees the stale line (C4), and strict ends the process
            try (FlexioProcess c4 = FlexioProcess.create(ctx, ScenarioDevStubs.APP, ATTR)) {
                FlexioMkey mkey = FlexioMkey.hostMkeyCreate(c4, host + 8192, 4096);
                FlexioWindow w = FlexioWindow.create(c4, c4.pdn());
                long arg = windowArg(c4, w.id(), mkey.id(), host + 8192 + 64);
                started(c4, ScenarioDevStubs.POLL_NO_INV, arg);
                await("the stale poller's first read filled its window line", () -> c4.call(ScenarioDevStubs.RPC_READ, arg + W_READY) == 1);
                p.writeLong(host + 8192 + 64, 0x5a);
                await("C4 ended the process", () -> c4.errStatusGet() == FlexioStatus.ERR_FATAL_ERROR);
                String mm = run("dpa:mm");
                assertTrue(mm, mm.contains("process " + c4.id() + ":") && mm.contains("C4") && mm.contains("ScenarioDev.pollNoInv"));
            }
            p.munmap(host, 3 * 4096);
        } finally {
            p.exit();
        }
        assertClean(b);
    }

    /**
     * Scenario 3's peer-memory case: the window's mkey is a verbs MR over GPU memory (nvidia_peermem
     * with {@code persistent_api_support=0}, the invalidating nv_mem; the window on the MR's PD by
     * {@code mlx5dv_init_obj}); a thread spins writing through it; {@code gpu:free} runs the free
     * callback, mlx5 revokes the mkey before it returns. After it returned no byte crosses BAR1, the
     * writer's next access faults (WINDOW_FAULT, {@code dpa:crash} names the handler and the revoked
     * mkey) and the IOMMU saw no fault: refused at the mkey.
     */
    @Test
    public void scenario3PeerInvalidationUnderAConfiguredWindow() throws Exception {
        Baseline b = baseline();
        nvPeermemPersistentApi(0);
        AddressSpace p = process("itest-dpa-gpu-window");
        try (IbvContext ctx = devices.device(BF3).open(p)) {
            String dptr = run("gpu:alloc " + p.pid() + " 64K").trim();
            IbvPd pd = ctx.allocPd();
            IbvMr mr = pd.regMr(Long.decode(dptr), 64 << 10, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ);
            FlexioProcess fp = FlexioProcess.create(ctx, ScenarioDevStubs.APP, ATTR);
            try {
                assertTrue("nv_mem claimed the cudaMalloc range", mr.isPeer());
                FlexioWindow w = FlexioWindow.create(fp, Mlx5dv.initObjPd(pd));
                long spin = windowArg(fp, w.id(), mr.lkey(), Long.decode(dptr));
                started(fp, ScenarioDevStubs.SPIN_WINDOW, spin);
                await("the spinning writer reached GPU memory", () -> fp.call(ScenarioDevStubs.RPC_READ, spin + W_SEEN) >= 10);
                long faults = iommu.audit().faults();
                run("gpu:free " + p.pid() + " " + dptr); // the free callback: IB invalidate, mlx5's revoking UMR, then the RM frees
                long bar = iommu.barBytes();
                assertTrue("the free callback invalidated the MR", mr.invalidated());
                await("the writer's next access faulted", () -> fp.errStatusGet() == FlexioStatus.ERR_FATAL_ERROR);
                assertEquals("WINDOW_FAULT", 0x05, fp.processStatus());
                assertEquals("no window byte crossed BAR1 after the invalidation returned", bar, iommu.barBytes());
                assertEquals("refused at the mkey, before the IOMMU", faults, iommu.audit().faults());
                String crash = run("dpa:crash");
                assertTrue(crash, crash.contains("process " + fp.id() + " ") && crash.contains("ScenarioDev.spinWindow") && crash.contains("revoked"));
            } finally {
                fp.destroy();
                mr.dereg();
                pd.dealloc();
            }
        } finally {
            p.exit();
            nvPeermemPersistentApi(1);
        }
        assertClean(b);
    }

    /** nvidia_peermem's {@code persistent_api_support} through Configuration Admin; returns when {@code peermem:clients} shows its clients. */
    void nvPeermemPersistentApi(int v) throws Exception {
        org.osgi.framework.ServiceReference<ConfigurationAdmin> ref = context.getServiceReference(ConfigurationAdmin.class);
        ConfigurationAdmin cm = context.getService(ref);
        try {
            org.osgi.service.cm.Configuration c = cm.getConfiguration("org.peerdirect.nvidia_peermem", "?");
            Hashtable<String, Object> props = new Hashtable<>();
            props.put("persistent_api_support", v);
            c.update(props);
        } finally {
            context.ungetService(ref);
        }
        await("peermem:clients with persistent_api_support=" + v, () -> {
            try {
                return run("peermem:clients").contains("nv_mem_nc") == (v == 0);
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
    }

    // ---------------------------------------------------------------- scenario 4

    /** An RC QP of {@code fp} (rings and doorbell records in its heap; CQs polled, NON_DPA_CQ). */
    static FlexioQp qpIn(FlexioProcess fp) {
        long rcq = fp.bufDevAlloc(64 << 6);
        long scq = fp.bufDevAlloc(64 << 6);
        long dbr = fp.bufDevAlloc(192);
        long wq = fp.bufDevAlloc((64 << 4) + (64 << 4));
        assertTrue("heap for a QP", rcq != 0 && scq != 0 && dbr != 0 && wq != 0);
        FlexioCq r = FlexioCq.create(fp, new FlexioCq.Attr(6, FlexioCq.ElementType.NON_DPA_CQ, null, rcq, dbr));
        FlexioCq sq = FlexioCq.create(fp, new FlexioCq.Attr(6, FlexioCq.ElementType.NON_DPA_CQ, null, scq, dbr + 64));
        return FlexioQp.create(fp, new FlexioQp.Attr(sq, r, 4, 4, 2, wq, dbr + 128));
    }

    @Test
    public void scenario4OutboxIsolationAndKillingAProcessWhoseThreadsSpin() throws Exception {
        Baseline b = baseline();
        AddressSpace pa = process("itest-dpa-a");
        AddressSpace pb = process("itest-dpa-b");
        try (IbvContext ca = devices.device(BF3).open(pa); IbvContext cb = devices.device(BF3).open(pb)) {
            FlexioProcess fa = FlexioProcess.create(ca, ScenarioDevStubs.APP, ATTR);
            FlexioProcess fb = FlexioProcess.create(cb, ScenarioDevStubs.APP, ATTR);
            try {
                FlexioQp qpB = qpIn(fb);
                FlexioOutbox outboxA = FlexioOutbox.create(fa);
                // A's thread rings SXD_DB naming B's QP: dropped, A's process error (strict), B unaffected
                try {
                    fa.call(ScenarioDevStubs.RING_FOREIGN, outboxA.id(), qpB.qpNum());
                } catch (FlexioException expected) {
                    // the process error may end the call
                }
                await("the foreign doorbell ended A's process", () -> fa.errStatusGet() == FlexioStatus.ERR_FATAL_ERROR);
                String crash = run("dpa:crash");
                assertTrue(crash, crash.contains("process " + fa.id() + " ") && crash.contains("ScenarioDev.ringForeign"));
                assertTrue(crash, !crash.contains("process " + fb.id() + " "));
                assertEquals(5, fb.call(ScenarioDevStubs.RPC_ADD, 2L, 3L));
                assertEquals(FlexioStatus.ERR_NO_ERROR, fb.errStatusGet());
                killWhileSpinning(fb);
            } finally {
                fa.destroy();
                fb.destroy();
            }
        } finally {
            pa.exit();
            pb.exit();
        }
        assertClean(b);
    }

    /**
     * {@code kernel:kill} of a process whose thread spins writing host memory through a configured
     * window: the DevX uid cleanup ends its DPA process first (the EU released), no window DMA
     * faults after the kill, and the other process {@code fb} goes on answering.
     */
    void killWhileSpinning(FlexioProcess fb) throws Exception {
        AddressSpace pc = process("itest-dpa-killed");
        IbvContext cc = devices.device(BF3).open(pc);
        FlexioProcess fc = FlexioProcess.create(cc, ScenarioDevStubs.APP, ATTR);
        long host = pc.mmap(4096);
        pc.populate(host, 4096, true);
        FlexioMkey mkey = FlexioMkey.hostMkeyCreate(fc, host, 4096);
        FlexioWindow w = FlexioWindow.create(fc, fc.pdn());
        started(fc, ScenarioDevStubs.SPIN_WINDOW, windowArg(fc, w.id(), mkey.id(), host));
        await("the killed process's thread spins writing host memory", () -> pc.readLong(host) >= 10);
        int killed = fc.id();
        long faults = iommu.audit().faults();
        run("kernel:kill " + pc.pid());
        DpaView.Dpa d = dpaView.dpa(dpaView.functions().get(0));
        assertTrue("the killed process's DPA process is gone when kill returns: " + d.processes(),
                d.processes().stream().noneMatch(x -> x.id() == killed));
        assertTrue("its thread is gone: " + d.threads(), d.threads().stream().noneMatch(t -> t.process() == killed));
        assertEquals("its EU released", 0, d.eusBusy());
        assertEquals("no window DMA after the kill", faults, iommu.audit().faults());
        assertTrue(iommu.audit().toString(), iommu.audit().violationFree());
        assertEquals("the other process answers", 9, fb.call(ScenarioDevStubs.RPC_ADD, 4L, 5L));
        assertEquals(FlexioStatus.ERR_NO_ERROR, fb.errStatusGet());
    }

    // ---------------------------------------------------------------- machinery

    /**
     * What must be back after a scenario: the live processes (pids), the pinned user pages and the
     * BlueField-3's firmware pages; the IOMMU's live mappings only for the failure message (see
     * {@link #assertClean}).
     */
    record Baseline(List<Integer> pids, long pinned, int pages, long mappings) {
    }

    /**
     * Pages the firmware may keep beyond the baseline: it keeps up to 4 pages of free context space
     * (hca-sim's FirmwarePages HIGH_WATER) and gives pages back only above that, and mlx5_ib's UMR
     * resources and MR cache, made at a first registration, stay with the driver.
     */
    static final int FREE_CONTEXT_PAGES = 4;

    private static boolean warm;

    /** Every process a scenario made through {@link #process} (checked by {@link #assertClean}). */
    final List<AddressSpace> made = new ArrayList<>();

    /**
     * The baseline, after one echo sample ran on the BlueField-3 first (once per framework): mlx5_ib
     * makes its UMR CQ/QP and MR cache entries, and the firmware asks for a context page, at a first
     * use and keeps them; those are the driver's, not a scenario's leak.
     */
    Baseline baseline() throws Exception {
        if (!warm) {
            assertTrue(run("dpa:sample echo -d " + BF3 + " -n 1").contains("1 of 1 messages echoed"));
            warm = true;
        }
        return new Baseline(pids(), mm.pinnedFrames(), held(bf3Line()), iommu.audit().liveMappings());
    }

    /** {@code hca:cx4}'s line of the BlueField-3: pages held, CQs, QPs, mkeys, DevX objects. */
    String bf3Line() throws Exception {
        return run("hca:cx4").lines().filter(l -> l.contains("BlueField-3:")).findFirst()
                .orElseThrow(() -> new AssertionError("hca:cx4 lists no BlueField-3"));
    }

    static int held(String line) {
        Matcher m = Pattern.compile("pages held (\\d+)").matcher(line);
        assertTrue(line, m.find());
        return Integer.parseInt(m.group(1));
    }

    /**
     * No DPA process, thread or busy EU; no DevX object (every DPA general object gone, so their
     * contexts in the firmware's pages freed); the firmware's pages within what it keeps free; every
     * process the scenario (or a sample it ran) made has exited and no user page is pinned beyond the
     * baseline (its umems, mkeys, windows and MRs released their pages); no IOMMU violation (a page
     * freed while still mapped would be one). Not the container's live-mapping count: mlx5's command
     * mailbox pool only grows, as Linux's dma_pool, and a command overlapping a background one (page
     * requests, counters) can leave it one mapping larger; the driver's, not a leak (as b779566 for
     * DevxIT).
     */
    void assertClean(Baseline b) throws Exception {
        DpaView.Dpa d = dpaView.dpa(dpaView.functions().get(0));
        assertEquals("no DPA process left: " + d.processes(), List.of(), d.processes());
        assertEquals("no DPA thread left: " + d.threads(), List.of(), d.threads());
        assertEquals("no EU busy", 0, d.eusBusy());
        String line = bf3Line();
        assertTrue("no DevX object left: " + line, line.contains("DevX: user contexts 0, umems 0, general objects 0"));
        assertTrue("the firmware's pages: " + line + " (baseline " + b.pages() + ")", held(line) <= b.pages() + FREE_CONTEXT_PAGES);
        assertEquals("every process of the scenario exited", b.pids(), pids());
        for (AddressSpace p : made) {
            assertEquals("process " + p.pid() + " (" + p.name() + ") has no page pinned after its exit", 0, p.pinnedPages());
        }
        assertEquals("no user page pinned beyond the baseline", b.pinned(), mm.pinnedFrames());
        assertTrue("no IOMMU violation: " + iommu.audit() + " (" + b.mappings() + " live mappings at the baseline)",
                iommu.audit().violationFree());
    }

    /** The live processes' pids, in order. */
    List<Integer> pids() {
        return mm.processes().stream().map(AddressSpace::pid).toList();
    }

    AddressSpace process(String name) {
        AddressSpace p = mm.createProcess(name);
        p.setMemlockLimit(16L << 20);
        made.add(p);
        return p;
    }

    String run(String cmd) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession s = processor.createSession(System.in, ps, ps)) {
            Object r = s.execute(cmd);
            return out.toString(StandardCharsets.UTF_8) + (r == null ? "" : r);
        }
    }

    /** Polls {@code cond} (bounded); the back-off is a poll's, not a synchronisation. */
    static void await(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + WAIT_NANOS;
        while (!cond.getAsBoolean()) {
            assertTrue(what + " within 30 s", System.nanoTime() < deadline);
            LockSupport.parkNanos(1_000_000);
        }
    }
}
