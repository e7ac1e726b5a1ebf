package org.peerdirect.itest;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.ProbeBuilder;
import org.ops4j.pax.exam.TestProbeBuilder;
import org.osgi.framework.BundleContext;
import org.peerdirect.doca.dpa.DocaDpaObjects;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;

/**
 * What the DOCA scenario ITs ({@code DocaScenariosIT}, {@code DocaRdmaIT}, {@code DocaVerbsIT})
 * share: the container (the distribution, Gogo's API for the probe), the services a
 * {@link DocaRun} uses (Pax Exam injects a superclass's fields too), a run of an app, and a Gogo
 * command's output.
 */
public abstract class DocaIt {

    @Inject
    protected BundleContext context;
    @Inject
    protected IbvDeviceList devices;
    @Inject
    protected Mm mm;
    @Inject
    protected Iommu iommu;
    @Inject
    protected DocaDpaObjects objects;
    @Inject
    protected CommandProcessor processor;

    /** The checks read {@code dpa:ps} (and the mutants {@code dpa:mm}, {@code dpa:crash}). */
    @ProbeBuilder
    public TestProbeBuilder probe(TestProbeBuilder builder) {
        return Distribution.withGogo(builder);
    }

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    /** A run of {@code app} in process {@code name} on the container's BlueField-3 ({@link DocaRun}: its clean-up checks). */
    protected DocaRun run(String name, FlexioApp app) {
        return new DocaRun(new DocaRun.Container(context, devices, mm, iommu, objects, processor), name, app);
    }

    /** {@code cmd}'s output in a Gogo session. */
    protected String run(String cmd) {
        return DocaRun.shell(processor, cmd);
    }
}
