package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.peerdirect.dpa.samples.dev.InitiatorTargetDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.BundleContext;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.InitiatorTargetDevStubs;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * DOCA RDMA with its data path on the DPA inside Felix (DPA_MODEL.md §4 scenario 6, DOCA's
 * {@code dpa_initiator_target}): on the container's BlueField-3, an initiator and a target DOCA RDMA
 * context joined by two connections, the target's feeding one completion context; thread 1 takes
 * the four receives (values 1..4, immediates 10..13, user data = connection id), thread 2 sets the
 * event to 10 while the host waits > 9; everything destroyed, nothing pinned, the IOMMU audit clean.
 * The device code is dpa-samples' {@code InitiatorTargetDev} (the sample's own); its mutant switch
 * leaves out {@code request_notification}: thread 1 runs once, C7.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaRdmaIT {

    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;

    @Inject
    BundleContext context;
    @Inject
    IbvDeviceList devices;
    @Inject
    Mm mm;
    @Inject
    Iommu iommu;
    @Inject
    org.apache.felix.service.command.CommandProcessor processor;

    /** The mutant's check reads {@code dpa:ps} and {@code dpa:mm}. */
    @org.ops4j.pax.exam.ProbeBuilder
    public org.ops4j.pax.exam.TestProbeBuilder probe(org.ops4j.pax.exam.TestProbeBuilder builder) {
        return Distribution.withGogo(builder);
    }

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    private static DocaRdma rdma(DocaDev dev, DocaDpa dpa, DocaDpaCompletion comp, List<Runnable> undo) {
        DocaRdma r = DocaRdma.create(dev);
        r.setPermissions(RW);
        r.setDatapathOnDpa(dpa);
        r.setMaxNumConnections(2);
        if (comp != null) {
            r.dpaCompletionAttach(comp);
        }
        r.start();
        undo.add(r::destroy);
        return r;
    }

    private static int map(DocaDev dev, DocaDpa dpa, long daddr, List<Runnable> undo) {
        DocaMmap m = DocaMmap.create();
        m.setDpaMemrange(dpa, daddr, 64);
        m.setPermissions(RW);
        m.addDev(dev);
        m.start();
        undo.add(m::destroy);
        return m.devGetDpaHandle(dev);
    }

    @Test
    public void theInitiatorTargetSampleRunsOnTheContainersBlueField3() throws Exception {
        scenario6(false);
    }

    /**
     * Scenario 6's mutant: thread 1 acknowledges but does not request notification before it
     * reschedules. No further completion triggers it: it runs once, the checker reports the lost
     * wake-up (C7, strict: the process ends), the event is never set; nothing is left afterwards.
     */
    @Test
    public void withoutRequestNotificationThread1RunsOnceOnly() throws Exception {
        scenario6(true);
    }

    String run(String cmd) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        java.io.PrintStream ps = new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8);
        try (org.apache.felix.service.command.CommandSession s = processor.createSession(System.in, ps, ps)) {
            Object r = s.execute(cmd);
            return out.toString(java.nio.charset.StandardCharsets.UTF_8) + (r == null ? "" : r);
        } catch (Exception e) {
            throw new AssertionError(cmd + ": " + e, e);
        }
    }

    private void scenario6(boolean mutant) throws Exception {
        AddressSpace p = mm.createProcess(mutant ? "itest-doca-rdma-mutant" : "itest-doca-rdma");
        p.setMemlockLimit(1L << 30);
        try {
            DocaDev dev = null;
            for (DocaDevinfo i : DocaDevinfo.createList(p, devices, DocaDevinfo.pciAddrOfServices(context))) {
                if (dev == null && i.getIbdevName().startsWith("mlx5_")) {
                    DocaDev d = DocaDev.open(i);
                    if (DocaDpa.capIsSupported(d)) {
                        dev = d;
                    } else {
                        d.close();
                    }
                }
            }
            assertTrue("a BlueField-3", dev != null);
            DocaDpa dpa = DocaDpa.create(dev);
            dpa.setApp(InitiatorTargetDevStubs.APP);
            dpa.start();
            List<Runnable> undo = new ArrayList<>();
            DocaRdma initiator = rdma(dev, dpa, null, undo);
            long a1 = dpa.memAlloc(T1_SIZE);
            dpa.memset(a1, 0, T1_SIZE);
            DocaDpaThread t1 = DocaDpaThread.create(dpa);
            undo.add(t1::destroy);
            t1.setFuncArg(InitiatorTargetDevStubs.THREAD1_KERNEL, a1);
            t1.start();
            DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, 4);
            undo.add(comp::destroy);
            comp.setThread(t1);
            comp.start();
            DocaRdma target = rdma(dev, dpa, comp, undo);
            for (int i = 0; i < 2; i++) {
                DocaRdma.Export ie = initiator.export();
                DocaRdma.Export te = target.export();
                initiator.connect(te.connectionDetails(), ie.connection());
                target.connect(ie.connectionDetails(), te.connection());
            }
            t1.run();
            DocaSyncEvent ev = DocaSyncEvent.create();
            ev.addPublisherLocationDpa(dpa);
            ev.addSubscriberLocationDpa(dpa);
            ev.start();
            undo.add(ev::destroy);
            long a2 = dpa.memAlloc(T2_SIZE);
            dpa.h2dMemcpy(a2, le(ev.getDpaHandle(dpa), 10));
            DocaDpaThread t2 = DocaDpaThread.create(dpa);
            undo.add(t2::destroy);
            t2.setFuncArg(InitiatorTargetDevStubs.THREAD2_KERNEL, a2);
            t2.start();
            DocaDpaNotificationCompletion note = DocaDpaNotificationCompletion.create(dpa, t2);
            note.start();
            undo.add(note::destroy);
            t2.run();
            long recv = dpa.memAlloc(64);
            long send = dpa.memAlloc(64);
            dpa.h2dMemcpy(send, le(1, 2, 3, 4));
            int recvKey = map(dev, dpa, recv, undo);
            int sendKey = map(dev, dpa, send, undo);
            dpa.h2dMemcpy(a1, le(0, note.getDpaHandle(), comp.getDpaHandle(), target.getDpaHandle(), recv, recvKey, 8));
            dpa.h2dMemcpy(a1 + T1_MUTANT_NO_REQUEST, le(mutant ? 1 : 0));
            dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_RECEIVE_RPC, 0L, target.getDpaHandle(), recv, recvKey, 8L);
            if (mutant) {
                mutantRunsOnce(dpa, initiator, send, sendKey, t1, ev);
            } else {
                sampleRuns(dpa, initiator, send, sendKey, a1, t1, t2, ev);
            }
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            dpa.stop();
            dpa.destroy();
            dev.close();
            assertEquals("nothing of the process pinned", 0, p.pinnedPages());
        } finally {
            p.exit();
        }
        IommuAudit audit = iommu.audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }

    /** The mutant's first receive runs thread 1; its second never does: C7 reported, one activation, no event. */
    private void mutantRunsOnce(DocaDpa dpa, DocaRdma initiator, long send, int sendKey, DocaDpaThread t1, DocaSyncEvent ev) {
        dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), 0, send, sendKey, 8L, 10);
        try {
            dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), 1, send + 8, sendKey, 8L, 11);
        } catch (org.peerdirect.doca.DocaException e) { // thread 1's reschedule may have ended the process (strict C7) before this RPC
            assertEquals(e.getMessage(), org.peerdirect.doca.DocaError.DOCA_ERROR_DRIVER, e.error());
        }
        long deadline = System.nanoTime() + 60_000_000_000L;
        String seen;
        while (!(seen = run("dpa:ps") + run("dpa:mm")).contains("C7")) {
            assertTrue("C7 reported:\n" + seen, System.nanoTime() < deadline);
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L); // polling the bench's report: no event to wait on
        }
        assertTrue(seen, seen.contains("not armed"));
        assertEquals("thread 1 ran once only", 1, t1.activations());
        org.peerdirect.doca.DocaException e = org.junit.Assert.assertThrows(org.peerdirect.doca.DocaException.class,
                () -> ev.waitGt(9, -1L, Duration.ofMillis(300)));
        assertTrue("the event is never set: " + e.getMessage(), e.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_TIME_OUT
                || e.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_DRIVER || e.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_BAD_STATE);
    }

    /** The sample's four sends: the event set to 10, each value and immediate once, user data the connection, 4 + 1 activations. */
    private void sampleRuns(DocaDpa dpa, DocaRdma initiator, long send, int sendKey, long a1, DocaDpaThread t1, DocaDpaThread t2, DocaSyncEvent ev) {
        for (int i = 0; i < 4; i++) {
            dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), i % 2, send + 8L * i, sendKey, 8L, 10 + i);
        }
        ev.waitGt(9, -1L, Duration.ofSeconds(60));
        assertEquals(10, ev.get());
        ByteBuffer b = ByteBuffer.wrap(dpa.d2hMemcpy(a1, T1_SIZE)).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals("four receives", 4, b.getLong(T1_NUM_RECEIVE));
        for (int v = 0; v < 4; v++) {
            assertEquals("value " + (v + 1) + " received", 1, b.getInt(T1_RECEIVED_VALUES + 4 * v));
        }
        long imms = 0;
        long values = 0;
        for (int n = 0; n < 4; n++) {
            long imm = b.getLong(T1_RECORD + 32 * n + 8);
            long value = b.getLong(T1_RECORD + 32 * n + 24);
            assertEquals("receive " + n + ": value " + value + " came with immediate " + (9 + value), 9 + value, imm);
            assertEquals("receive " + n + ": user data is the connection id of immediate " + imm, (imm - 10) % 2, b.getLong(T1_RECORD + 32 * n + 16));
            imms |= 1L << imm;
            values |= 1L << value;
        }
        assertEquals("immediates 10..13", 0xfL << 10, imms);
        assertEquals("values 1..4 each once", 0x1eL, values);
        assertEquals(4, t1.activations());
        assertEquals(1, t2.activations());
    }
}
