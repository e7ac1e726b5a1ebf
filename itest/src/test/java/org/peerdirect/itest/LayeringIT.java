package org.peerdirect.itest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

import org.junit.jupiter.api.Test;

/**
 * The layering rules, read from the built bundles' manifests (what the OSGi framework enforces,
 * checked before it has to): the silicon imports nothing of the IB core or the peer-memory API; no
 * project bundle imports a package another project bundle keeps private; private packages are not
 * exported.
 */
class LayeringIT {

    private record Bundle(String name, List<String> imports, List<String> exports) {
    }

    /**
     * The device models (the HCAs, the GPU, the SSD) import only the simulated kernel's packages and their
     * own: nothing of the IB core, the peer-memory API or a driver (the GPU model nothing of
     * {@code nvidia.ko}'s resource manager).
     */
    @Test
    void theSiliconImportsOnlyTheKernelAndItsOwnPackages() throws IOException {
        Map<String, Bundle> all = bundles();
        for (String name : List.of("org.peerdirect.hca-sim", "org.peerdirect.gpu-sim", "org.peerdirect.ssd-sim")) {
            Bundle model = all.get(name);
            assertTrue(model != null, name + " is among the bundles");
            List<String> bad = model.imports().stream()
                    .filter(p -> p.startsWith("org.peerdirect.") && !p.startsWith("org.peerdirect.kernel.") && !model.exports().contains(p))
                    .toList();
            assertEquals(List.of(), bad, "a device model sees only MMIO, DMA and MSI-X: " + name + " imports " + bad);
        }
    }

    @Test
    void noBundleImportsAnotherBundlesPrivatePackage() throws IOException {
        Map<String, Bundle> all = bundles();
        Map<String, String> exporter = new HashMap<>();
        for (Bundle b : all.values()) {
            for (String p : b.exports()) {
                exporter.put(p, b.name());
            }
        }
        List<String> bad = new ArrayList<>();
        for (Bundle b : all.values()) {
            for (String p : b.imports()) {
                if (p.startsWith("org.peerdirect.") && !exporter.containsKey(p)) {
                    bad.add(b.name() + " imports " + p + ", which no bundle exports");
                }
            }
            for (String p : b.exports()) {
                if (p.endsWith(".impl") || p.contains(".impl.") || p.endsWith(".internal") || p.contains(".internal.")
                        || p.endsWith(".uverbs") || p.endsWith(".peer")) {
                    bad.add(b.name() + " exports its private package " + p);
                }
            }
        }
        assertEquals(List.of(), bad);
        assertTrue(all.size() >= 6, "the project's bundles were found: " + all.keySet());
    }

    private static Map<String, Bundle> bundles() throws IOException {
        Map<String, Bundle> out = new HashMap<>();
        for (Path jar : Distribution.jars()) {
            try (JarFile j = new JarFile(jar.toFile())) {
                Manifest m = j.getManifest();
                if (m == null) {
                    continue;
                }
                String bsn = m.getMainAttributes().getValue("Bundle-SymbolicName");
                if (bsn == null || !bsn.startsWith("org.peerdirect")) {
                    continue;
                }
                bsn = bsn.split(";")[0].trim();
                out.put(bsn, new Bundle(bsn, packages(m.getMainAttributes().getValue("Import-Package")),
                        packages(m.getMainAttributes().getValue("Export-Package"))));
            }
        }
        return out;
    }

    /** The package names of an OSGi package header (clauses split at commas outside quotes). */
    static List<String> packages(String header) {
        List<String> out = new ArrayList<>();
        if (header == null) {
            return out;
        }
        boolean quoted = false;
        int start = 0;
        for (int i = 0; i <= header.length(); i++) {
            char c = i < header.length() ? header.charAt(i) : ',';
            if (c == '"') {
                quoted = !quoted;
            } else if (c == ',' && !quoted) {
                String clause = header.substring(start, i);
                out.add(clause.split(";")[0].trim());
                start = i + 1;
            }
        }
        return out;
    }
}
