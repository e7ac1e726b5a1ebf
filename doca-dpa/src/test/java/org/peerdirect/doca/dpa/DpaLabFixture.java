package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioApp;

/**
 * The up and down DOCA DPA's and DOCA RDMA's tests share (doca-rdma takes it from doca-dpa's
 * test-jar with {@link DpaLab}): a {@link DpaLab} with {@code bluefields} BlueField-3s, each opened
 * as a {@link DocaDev} ({@link #dev} the first), and, given an app, a started {@link DocaDpa} on
 * {@link #dev}. After each test: {@link #undo} newest first, every DPA context {@link #started}
 * stopped and destroyed in its order, no DPA process left on any BlueField-3, the devices closed,
 * the lab closed (which fails naming what was left). A subclass's own {@code @BeforeEach} runs
 * after this one's and its {@code @AfterEach} before this one's (JUnit's order for inherited
 * methods), so what it makes on top goes first.
 */
public abstract class DpaLabFixture {

    @TempDir
    protected Path tmp;
    protected DpaLab lab;
    /** {@code mlx5_0}, a BlueField-3. */
    protected DocaDev dev;
    /** The DPA context on {@link #dev} with the app (null when the subclass gave none). */
    protected DocaDpa dpa;
    /** {@code mlx5_0 .. mlx5_<bluefields-1>}, opened. */
    protected final List<DocaDev> devs = new ArrayList<>();
    /** Every DPA context {@link #started}: stopped and destroyed after {@link #undo}, in this order. */
    protected final List<DocaDpa> dpas = new ArrayList<>();
    /** What the teardown destroys first, newest first (before the DPA contexts and devices). */
    protected final List<Runnable> undo = new ArrayList<>();

    private final FlexioApp app;
    private final int bluefields;

    /** One BlueField-3, a DPA context with {@code app} started on it ({@code app} null: none). */
    protected DpaLabFixture(FlexioApp app) {
        this(app, 1);
    }

    /** {@code bluefields} BlueField-3s, each opened; a DPA context with {@code app} on the first (null: none). */
    protected DpaLabFixture(FlexioApp app, int bluefields) {
        this.app = app;
        this.bluefields = bluefields;
    }

    @BeforeEach
    protected final void labUp() {
        lab = new DpaLab(tmp, bluefields);
        for (int d = 0; d < bluefields; d++) {
            devs.add(lab.open(d));
        }
        dev = devs.get(0);
        if (app != null) {
            dpa = started(dev, app);
        }
    }

    /** A DPA context on {@code d} with {@code a}, started; the teardown stops and destroys it. */
    protected final DocaDpa started(DocaDev d, FlexioApp a) {
        DocaDpa x = DocaDpa.create(d);
        x.setApp(a);
        beforeStart(x);
        x.start();
        dpas.add(x);
        return x;
    }

    /** What a test sets on each DPA context {@link #started} between its app and its start (a log file); nothing by default. */
    protected void beforeStart(DocaDpa d) {
    }

    /** {@code n} bytes of {@code d}'s DPA heap, zeroed; freed by the teardown (in {@link #undo}). */
    protected final long alloc(DocaDpa d, long n) {
        long a = d.memAlloc(n);
        d.memset(a, 0, n);
        undo.add(() -> d.memFree(a));
        return a;
    }

    /** {@code n} bytes of {@link #dpa}'s heap, zeroed; freed by the teardown. */
    protected final long alloc(long n) {
        return alloc(dpa, n);
    }

    /** A started map of {@code d}'s memory [daddr, daddr+len) on {@code on} with {@code permissions}; destroyed by the teardown. */
    protected final DocaMmap dpaMmap(DocaDpa d, DocaDev on, long daddr, long len, int permissions) {
        DocaMmap m = DocaMmap.create();
        m.setDpaMemrange(d, daddr, len);
        m.setPermissions(permissions);
        m.addDev(on);
        m.start();
        undo.add(m::destroy);
        return m;
    }

    /** A started sync event {@link #dpa} publishes and subscribes to; destroyed by the teardown. */
    protected final DocaSyncEvent dpaEvent() {
        DocaSyncEvent e = DocaSyncEvent.create();
        e.addPublisherLocationDpa(dpa);
        e.addSubscriberLocationDpa(dpa);
        e.start();
        undo.add(e::destroy);
        return e;
    }

    @AfterEach
    protected final void labDown() {
        for (int i = undo.size() - 1; i >= 0; i--) {
            undo.get(i).run();
        }
        for (DocaDpa x : dpas) {
            x.stop();
            x.destroy();
        }
        for (int d = 0; d < bluefields; d++) {
            int n = d;
            assertEquals(List.of(), lab.dpa(d).stream().filter(l -> !l.startsWith("eu")).toList(), "mlx5_" + n + ": no DPA process left");
        }
        devs.forEach(DocaDev::close);
        lab.close();
    }
}
