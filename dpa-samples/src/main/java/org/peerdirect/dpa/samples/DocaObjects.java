package org.peerdirect.dpa.samples;

import java.util.List;
import java.util.Locale;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.doca.dpa.DocaDpaObjects;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The {@code dpa:doca} Gogo command: DOCA DPA's objects in the user processes, read from the
 * doca-dpa bundle's {@link DocaDpaObjects} service. A command of its own rather than more lines in
 * {@code dpa:ps}/{@code dpa:threads}: those are the BlueField-3 firmware's view (hca-sim, which
 * imports nothing of user space), while a DOCA context, sync event or kernel launch exists only in
 * the user's library; each started context names its FlexIO process, the row {@code dpa:ps} shows.
 */
@Component(service = DocaObjects.class, property = {"osgi.command.scope=dpa", "osgi.command.function=doca"})
public final class DocaObjects {

    private final DocaDpaObjects objects;

    @Activate
    public DocaObjects(@Reference DocaDpaObjects objects) {
        this.objects = objects;
    }

    @Descriptor("DOCA DPA's objects per user process: contexts (device, app, state, FlexIO process of dpa:ps), threads with "
            + "what triggers them, sync events with their values, kernel launches (launched, started, finished, the last). Example: dpa:doca")
    public String doca(@Descriptor("[PID]") Object... args) {
        Integer pid = null;
        if (args.length > 1) {
            throw new UsageException("dpa:doca: at most one argument, a process id");
        }
        if (args.length == 1) {
            try {
                pid = Integer.valueOf(String.valueOf(args[0]));
            } catch (NumberFormatException e) {
                throw new UsageException("dpa:doca: " + args[0] + " is no process id");
            }
        }
        return format(objects.contexts(), pid);
    }

    /** The contexts (of {@code pid}, or all when null), one block each. */
    static String format(List<DocaDpaObjects.Context> contexts, Integer pid) {
        StringBuilder b = new StringBuilder();
        for (DocaDpaObjects.Context c : contexts) {
            if (pid == null || c.pid() == pid) {
                context(b, c);
            }
        }
        if (b.isEmpty()) {
            return pid == null ? "no DOCA DPA context in any process" : "no DOCA DPA context in process " + pid;
        }
        return b.toString().stripTrailing();
    }

    private static void context(StringBuilder b, DocaDpaObjects.Context c) {
        line(b, 0, "process %d (%s): doca_dpa on %s, app %s, %s%s", c.pid(), c.process(), c.device(), c.app(), c.state(),
                c.flexioProcess() < 0 ? "" : ", FlexIO process " + c.flexioProcess() + " (dpa:ps)");
        for (DocaDpaObjects.Thread t : c.threads()) {
            line(b, 2, "thread %s(0x%x) %s%s, activations %s", t.func(), t.arg(), t.state(), t.eu() < 0 ? "" : ", EU " + t.eu(),
                    t.activations() < 0 ? "unknown" : String.valueOf(t.activations()));
            if (t.completions().isEmpty()) {
                line(b, 4, "triggered by: nothing attached");
            }
            for (String comp : t.completions()) {
                line(b, 4, "triggered by: %s", comp);
            }
        }
        for (DocaDpaObjects.Event e : c.events()) {
            line(b, 2, "%s; value %s", e.description(), e.value());
        }
        DocaDpaObjects.Kernels k = c.kernels();
        line(b, 2, "kernels: launched %d, started %d, finished %d, pending %d", k.launched(), k.started(), k.finished(), k.pending());
        if (k.launched() > 0) {
            line(b, 4, "last launched: %s", k.lastLaunched());
            line(b, 4, "last finished: %s", k.lastFinished());
        }
        if (k.failure() != null) {
            line(b, 4, "failed: %s", k.failure());
        }
    }

    private static void line(StringBuilder b, int indent, String format, Object... args) {
        b.append(" ".repeat(indent)).append(String.format(Locale.ROOT, format, args)).append('\n');
    }
}
