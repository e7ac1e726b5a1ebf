package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarFile;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.wiring.BundleRevision;
import org.osgi.service.component.runtime.ServiceComponentRuntime;
import org.osgi.service.component.runtime.dto.ComponentConfigurationDTO;
import org.osgi.service.component.runtime.dto.ComponentDescriptionDTO;

/** The whole distribution in Felix: every bundle ACTIVE, every DS component satisfied and active. */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class ContainerIT {

    @Inject
    BundleContext context;

    @Inject
    ServiceComponentRuntime scr;

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    /** Symbolic names of the distribution's jars, read in the test-runner JVM. */
    private static Set<String> distributionNames() throws Exception {
        Set<String> names = new TreeSet<>();
        for (var p : Distribution.jars()) {
            try (JarFile jar = new JarFile(p.toFile())) {
                String bsn = jar.getManifest().getMainAttributes().getValue("Bundle-SymbolicName");
                names.add(bsn.split(";")[0].trim());
            }
        }
        return names;
    }

    @Test
    public void everyDistributionBundleIsActive() throws Exception {
        Set<String> expected = distributionNames();
        assertTrue("the distribution holds every project bundle: " + expected, expected.containsAll(List.of(
                "org.peerdirect.peer-mem-api", "org.peerdirect.sim-kernel", "org.peerdirect.hca-sim",
                "org.peerdirect.ib-core", "org.peerdirect.rdma-tools", "org.peerdirect.doca-core", "org.peerdirect.flexio-dev", "org.peerdirect.flexio", "org.peerdirect.doca-dpa-dev", "org.peerdirect.doca-dpa", "org.peerdirect.doca-rdma", "org.peerdirect.doca-verbs", "org.peerdirect.dpa-samples", "org.peerdirect.umem-test", "org.peerdirect.mlx4-provider", "org.peerdirect.mlx5-provider",
                "org.peerdirect.example-peer-mem", "org.peerdirect.gpu-sim", "org.peerdirect.nvidia", "org.peerdirect.gpu-peer-mem", "org.peerdirect.ssd-sim", "org.peerdirect.nvme", "org.peerdirect.ssd-peer-mem",
                "org.apache.felix.scr", "org.apache.felix.configadmin", "org.apache.felix.log",
                "org.apache.felix.gogo.runtime", "org.apache.felix.gogo.command", "org.apache.felix.gogo.jline")));
        List<String> notActive = new ArrayList<>();
        Set<String> seen = new TreeSet<>();
        for (Bundle b : context.getBundles()) {
            if (!expected.contains(b.getSymbolicName())) {
                continue;
            }
            seen.add(b.getSymbolicName());
            boolean fragment = (b.adapt(BundleRevision.class).getTypes() & BundleRevision.TYPE_FRAGMENT) != 0;
            if (!fragment && b.getState() != Bundle.ACTIVE) {
                notActive.add(b.getSymbolicName() + " state " + b.getState());
            }
        }
        assertEquals("every distribution bundle is installed", expected, seen);
        assertTrue("not ACTIVE: " + notActive, notActive.isEmpty());
    }

    @Test
    public void everyComponentIsSatisfiedAndNoneFailed() {
        Collection<ComponentDescriptionDTO> descriptions = scr.getComponentDescriptionDTOs();
        List<String> problems = new ArrayList<>();
        int active = 0;
        for (ComponentDescriptionDTO d : descriptions) {
            if (!scr.isComponentEnabled(d)) {
                problems.add(d.name + " is disabled");
                continue;
            }
            for (ComponentConfigurationDTO c : scr.getComponentConfigurationDTOs(d)) {
                switch (c.state) {
                    case ComponentConfigurationDTO.UNSATISFIED_CONFIGURATION,
                         ComponentConfigurationDTO.UNSATISFIED_REFERENCE ->
                        problems.add(d.name + " unsatisfied: " + Arrays.toString(c.unsatisfiedReferences));
                    case ComponentConfigurationDTO.FAILED_ACTIVATION ->
                        problems.add(d.name + " failed: " + c.failure);
                    default -> active++;
                }
            }
        }
        assertTrue("components with problems: " + problems, problems.isEmpty());
        assertTrue("the project has components (found " + descriptions.size() + ")", active > 0);
        assertNotNull("sim-kernel's sysfs component is among them",
                descriptions.stream().filter(d -> d.name.endsWith("SysfsService")).findFirst().orElse(null));
    }
}
