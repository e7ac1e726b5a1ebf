package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.osgi.framework.BundleContext;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaObjects;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * One DOCA scenario's run inside Felix, shared by the DOCA ITs ({@code DocaScenariosIT},
 * {@code DocaRdmaIT}, {@code DocaVerbsIT}): a fresh process, the container's first BlueField-3
 * opened as a {@link DocaDev}, a started {@link DocaDpa} with the scenario's app, and what the
 * scenario made ({@link #undo}, destroyed newest first). {@link #close} destroys it all, then
 * checks the scenario's own objects: its process has no DOCA DPA context left
 * ({@link DocaDpaObjects}), nothing of it is pinned, no DPA process is left ({@code dpa:ps}), the
 * IOMMU audit has no fault and no violation. The container's global live-mapping count is not
 * compared (mlx5's command mailbox pool may grow meanwhile: the driver's, not a leak).
 */
final class DocaRun implements AutoCloseable {

    /** Local read/write and remote write: what the scenarios' maps of DPA memory allow unless they say otherwise. */
    static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;

    /** The container's services a run uses (the IT's injected ones). */
    record Container(BundleContext context, IbvDeviceList devices, Mm mm, Iommu iommu, DocaDpaObjects objects, CommandProcessor processor) {
    }

    final Container c;
    final AddressSpace p;
    final DocaDev dev;
    final DocaDpa dpa;
    /** What the scenario made, destroyed newest first by {@link #close}. */
    final List<Runnable> undo = new ArrayList<>();

    /** Process {@code name}, the first BlueField-3 (fails naming it when there is none), a DPA context with {@code app} started. */
    DocaRun(Container c, String name, FlexioApp app) {
        this.c = c;
        p = c.mm().createProcess(name);
        p.setMemlockLimit(1L << 30);
        DocaDev d = null;
        for (DocaDevinfo i : DocaDevinfo.createList(p, c.devices(), DocaDevinfo.pciAddrOfServices(c.context()))) {
            if (d == null && i.getIbdevName().startsWith("mlx5_") && DocaDpa.capIsSupported(i)) {
                d = DocaDev.open(i);
            }
        }
        if (d == null) {
            p.exit();
            throw new AssertionError("a BlueField-3 in the container: none of " + c.devices().devices());
        }
        dev = d;
        dpa = DocaDpa.create(dev);
        dpa.setApp(app);
        dpa.start();
    }

    /** {@code n} bytes of the DPA heap, zeroed; freed by {@link #close}. */
    long alloc(long n) {
        long d = dpa.memAlloc(n);
        dpa.memset(d, 0, n);
        undo.add(() -> dpa.memFree(d));
        return d;
    }

    /** A started map of DPA memory [daddr, daddr+len) with {@code permissions}; its DPA handle. */
    int dpaMap(long daddr, long len, int permissions) {
        DocaMmap m = DocaMmap.create();
        m.setDpaMemrange(dpa, daddr, len);
        m.setPermissions(permissions);
        m.addDev(dev);
        m.start();
        undo.add(m::destroy);
        return m.devGetDpaHandle(dev);
    }

    /** {@link #dpaMap(long, long, int)} with {@link #RW}. */
    int dpaMap(long daddr, long len) {
        return dpaMap(daddr, len, RW);
    }

    /** A started sync event the DPA publishes and subscribes to. */
    DocaSyncEvent dpaEvent() {
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationDpa(dpa);
        ev.addSubscriberLocationDpa(dpa);
        ev.start();
        undo.add(ev::destroy);
        return ev;
    }

    /** {@code n} little-endian words of DPA memory at {@code daddr}. */
    long[] words(long daddr, int n) {
        ByteBuffer b = ByteBuffer.wrap(dpa.d2hMemcpy(daddr, 8 * n)).order(ByteOrder.LITTLE_ENDIAN);
        long[] w = new long[n];
        for (int i = 0; i < n; i++) {
            w[i] = b.getLong();
        }
        return w;
    }

    /** Everything destroyed, then the checks: no context of this process, nothing pinned, no DPA process, the audit clean. */
    @Override
    public void close() {
        try {
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            dpa.stop();
            dpa.destroy();
            dev.close();
            assertTrue("no DOCA DPA context of process " + p.pid(), c.objects().contexts().stream().noneMatch(x -> x.pid() == p.pid()));
            assertEquals("nothing of the process pinned", 0, p.pinnedPages());
        } finally {
            p.exit();
        }
        String ps = shell(c.processor(), "dpa:ps");
        assertTrue(ps, ps.lines().noneMatch(l -> l.strip().matches("process \\d+ uid .*")));
        IommuAudit audit = c.iommu().audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }

    /** {@code cmd} in a Gogo session: what it printed, then its result (the probe must import Gogo's API: {@link Distribution#withGogo}). */
    static String shell(CommandProcessor processor, String cmd) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession s = processor.createSession(System.in, ps, ps)) {
            Object r = s.execute(cmd);
            return out.toString(StandardCharsets.UTF_8) + (r == null ? "" : r);
        } catch (Exception e) {
            throw new AssertionError(cmd + ": " + e, e);
        }
    }

    /** Little-endian words. */
    static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }
}
