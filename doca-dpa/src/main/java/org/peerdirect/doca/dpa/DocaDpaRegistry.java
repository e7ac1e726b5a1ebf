package org.peerdirect.doca.dpa;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.osgi.service.component.annotations.Component;

/**
 * The library's registry of live DPA contexts ({@link DocaDpa#create} adds, {@link DocaDpa#destroy}
 * removes), published as the {@link DocaDpaObjects} service. The registry is the library's own
 * state, one per JVM as libdoca's is one per process: contexts are created by user code with no
 * service at hand, so the component reads the static list rather than holding it. Copy-on-write:
 * a create or destroy never waits for a reader, and a reader never sees a half-added context.
 */
@Component(service = DocaDpaObjects.class)
public final class DocaDpaRegistry implements DocaDpaObjects {

    private static final List<DocaDpa> LIVE = new CopyOnWriteArrayList<>();

    static void add(DocaDpa dpa) {
        LIVE.add(dpa);
    }

    static void remove(DocaDpa dpa) {
        LIVE.remove(dpa);
    }

    @Override
    public List<Context> contexts() {
        List<Context> all = new ArrayList<>();
        for (DocaDpa d : LIVE) {
            if (d.processExited()) { // killed without doca_dpa_destroy: the library's memory went with the process
                LIVE.remove(d);
                continue;
            }
            all.add(d.snapshot());
        }
        all.sort(Comparator.comparingInt(Context::pid)); // stable: creation order within a process
        return List.copyOf(all);
    }
}
