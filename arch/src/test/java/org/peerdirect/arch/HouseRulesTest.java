package org.peerdirect.arch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.Location;

/**
 * DESIGN.md's layering, checked on the built bundles (main classes only, every dependency a class
 * has: signatures, fields, method bodies, annotations). Each rule collects its violations as
 * "bundle: class -> target" lines and fails listing all of them, so one run names everything a
 * change broke.
 *
 * <p>The rules:
 * <ol>
 * <li>silicon (the device models) imports only sim-kernel: a model sees MMIO, DMA through its
 *     IOMMU domain and MSI-X, and speaks hardware vocabulary;</li>
 * <li>drivers reach silicon only through its layout packages (the {@code mlx5_ifc}/{@code mlx5dv.h}
 *     and {@code mlx4} analogues, the NVMe register file), never through a model's objects, and
 *     use only the driver side of their PCI function (MMIO, {@code ioremap}, {@code dma()}, IRQs),
 *     never its device side ({@code barMemory}, {@code barAperture}, {@code dmaPort},
 *     {@code raiseMsix}, the firmware shortcut);</li>
 * <li>no bundle uses another bundle's private packages (what OSGi would refuse to wire anyway,
 *     caught at build time with the class that does it);</li>
 * <li>user libraries (the part of libmlx5 that runs in the user's process) never import the kernel
 *     side of their driver;</li>
 * <li>released API (a package exported at 1.0 or later) depends on no 0.x package and no private
 *     package: a consumer of a released API must not be tied to an unreleased one;</li>
 * <li>no test of one module sits in a package of another module's main code (a test reaching into
 *     another bundle's private package tests what no user can reach);</li>
 * <li>the HCA transport engine ({@code org.peerdirect.hca.engine}) is {@code hca-sim}'s own: labs
 *     and tests see a board through {@code org.peerdirect.hca.boards} (the fabric, the silicon's
 *     diagnostic view), drivers through the layout packages;</li>
 * <li>the DPA's ISA ({@code org.peerdirect.hca.dpa.isa}), the one package of the silicon DPA images
 *     see, imports nothing of the host: only {@code java.lang} and the OSGi annotations. (What an
 *     image itself may reference is the DPA loader's verifier's rule, checked when it is loaded.)</li>
 * </ol>
 */
class HouseRulesTest {

    /** Every module that is a bundle; a missing one would let a rule pass vacuously. */
    static final Set<String> MODULES = Set.of("peer-mem-api", "sim-kernel", "hca-sim", "ib-core", "rdma-tools",
            "umem-test", "testkit", "mlx4-provider", "mlx5-provider", "example-peer-mem", "gpu-sim", "nvidia",
            "gpu-peer-mem", "ssd-sim", "nvme", "ssd-peer-mem", "launcher", "webconsole", "doca-core", "flexio-dev", "flexio",
            "doca-dpa-dev", "doca-dpa", "doca-rdma", "doca-verbs", "dpa-samples");

    static final Set<String> SILICON = Set.of("hca-sim", "gpu-sim", "ssd-sim");
    static final Set<String> DRIVERS = Set.of("mlx4-provider", "mlx5-provider", "nvidia", "nvme");

    /** What drivers and user libraries may take from silicon: descriptor and register layouts. */
    static final Set<String> LAYOUT_PACKAGES = Set.of("org.peerdirect.hca.cx4.ifc", "org.peerdirect.hca.cx3.ifc",
            "org.peerdirect.ssd.regs", "org.peerdirect.gpu.ifc");

    /** User libraries (in the user's process) and the driver packages they must not import. */
    static final Map<String, List<String>> USER_LIBRARIES = Map.of(
            "org.peerdirect.mlx5.lib", List.of("org.peerdirect.mlx5.core", "org.peerdirect.mlx5.ib"),
            "org.peerdirect.mlx5.dv", List.of("org.peerdirect.mlx5.core", "org.peerdirect.mlx5.ib", "org.peerdirect.mlx5.lib"),
            "org.peerdirect.mlx4.lib", List.of("org.peerdirect.mlx4.core", "org.peerdirect.mlx4.ib"),
            "org.peerdirect.doca", List.of("org.peerdirect.mlx5", "org.peerdirect.mlx4", "org.peerdirect.hca"),
            "org.peerdirect.flexio", List.of("org.peerdirect.mlx5.core", "org.peerdirect.mlx5.ib", "org.peerdirect.mlx5.lib", "org.peerdirect.mlx4"),
            "org.peerdirect.dpa.samples", List.of("org.peerdirect.mlx5.core", "org.peerdirect.mlx5.ib", "org.peerdirect.mlx5.lib", "org.peerdirect.mlx4",
                    "org.peerdirect.hca.cx4"));

    /**
     * Device libraries inside a user library's package tree: code linked into DPA images, which
     * runs on the DPA and is written on its ISA (the image verifier checks what it references).
     */
    static final Set<String> DPA_DEVICE_LIBRARIES = Set.of("org.peerdirect.doca.dpa.dev");

    /** User libraries that build PRM commands themselves (over DevX): like drivers, they see silicon only through its layouts. */
    static final Set<String> DEVX_USER_LIBRARIES = Set.of("flexio");

    /** Device libraries, linked into DPA images: they see the ISA, {@code java.lang} and the device libraries below them only (what the image verifier allows). */
    static final Set<String> DEVICE_LIBRARIES = Set.of("flexio-dev", "doca-dpa-dev");

    /** What silicon may use outside the project: the JDK (JFR for its diagnostic events, as the DPA activation), OSGi, and Gogo for its lab commands. */
    static final List<String> SILICON_MAY_USE = List.of("java.", "jdk.jfr.", "org.osgi.", "org.apache.felix.service.command.");

    /**
     * Violations known while issue 41 lands in steps, as "rule|from bundle|target package", each
     * with why it is still there. A listed entry that no longer occurs fails the test too: the list
     * only shrinks.
     */
    static final Map<String, String> KNOWN = Map.of();

    /** Tests known to sit in another module's package while issue 41 lands, with why. */
    static final Map<String, String> KNOWN_TEST_PLACES = Map.of();

    static Bundles bundles;
    static JavaClasses classes;
    static final Map<String, Bundles.Bundle> bundleOfPackage = new HashMap<>();
    static final Map<String, Bundles.Bundle> bundleOfClass = new HashMap<>();

    @BeforeAll
    static void importTheBuiltBundles() {
        bundles = Bundles.fromClassPath();
        Set<String> found = bundles.all().stream().map(Bundles.Bundle::module).collect(Collectors.toCollection(TreeSet::new));
        assertEquals(new TreeSet<>(MODULES), found, "the bundles on the test class path");
        ClassFileImporter importer = new ClassFileImporter();
        List<JavaClass> all = new ArrayList<>();
        for (Bundles.Bundle b : bundles.all()) {
            JavaClasses own = importOne(importer, b.location());
            assertTrue(own.size() > 0, "no classes imported from " + b.location());
            for (JavaClass c : own) {
                bundleOfClass.put(c.getName(), b);
                Bundles.Bundle before = bundleOfPackage.put(c.getPackageName(), b);
                if (before != null && before != b) {
                    fail("package " + c.getPackageName() + " is in two bundles: " + before + " and " + b);
                }
                all.add(c);
            }
        }
        classes = importer.importLocations(bundles.all().stream().map(b -> location(b.location())).toList());
        assertEquals(all.size(), classes.size(), "classes imported one bundle at a time and all at once");
    }

    @Test
    void siliconImportsOnlySimKernel() {
        check("silicon-imports-only-sim-kernel", (from, d) -> {
            if (!SILICON.contains(from.module())) {
                return false;
            }
            String pkg = d.getTargetClass().getPackageName();
            if (!pkg.startsWith("org.peerdirect.")) {
                return !pkg.isEmpty() && SILICON_MAY_USE.stream().noneMatch((pkg + ".")::startsWith)
                        && !d.getTargetClass().isPrimitive() && !d.getTargetClass().isArray();
            }
            Bundles.Bundle to = bundleOfPackage.get(pkg);
            return to != null && to != from && !to.module().equals("sim-kernel");
        });
    }

    @Test
    void driversReachSiliconOnlyThroughLayoutPackages() {
        check("drivers-through-layout", (from, d) -> {
            Bundles.Bundle to = bundleOfPackage.get(d.getTargetClass().getPackageName());
            return (DRIVERS.contains(from.module()) || DEVX_USER_LIBRARIES.contains(from.module())) && to != null && SILICON.contains(to.module())
                    && !LAYOUT_PACKAGES.contains(d.getTargetClass().getPackageName());
        });
    }

    /** What {@code hca-sim} keeps to itself: the transport engine behind its personalities. */
    static final String HCA_ENGINE = "org.peerdirect.hca.engine";

    @Test
    void nothingOutsideHcaSimUsesTheEngine() {
        check("engine-private", (from, d) -> !from.module().equals("hca-sim") && inPackage(d.getTargetClass().getPackageName(), HCA_ENGINE));
    }

    /**
     * The same for what is no bundle (the rule above sees the bundles' main classes): no test of
     * another module and no benchmark names the engine; they see a board through
     * {@code org.peerdirect.hca.boards}, as a user's lab would.
     */
    @Test
    void noTestOrBenchmarkOutsideHcaSimNamesTheEngine() {
        Path root = Path.of(System.getProperty("user.dir")).getParent();
        List<String> wrong = new ArrayList<>();
        try (Stream<Path> modules = Files.list(root)) {
            // hca-sim owns the engine; this module names it to check it
            for (Path m : modules.filter(p -> !Set.of("hca-sim", "arch").contains(p.getFileName().toString())).sorted().toList()) {
                for (Path src : List.of(m.resolve("src/test/java"), m.resolve("src/main/java"))) {
                    boolean bundleMain = src.endsWith("src/main/java") && MODULES.contains(m.getFileName().toString());
                    if (bundleMain || !Files.isDirectory(src)) {
                        continue; // a bundle's main classes are the rule above's
                    }
                    try (Stream<Path> files = Files.walk(src)) {
                        for (Path f : files.filter(p -> p.toString().endsWith(".java")).sorted().toList()) {
                            if (Files.readString(f).contains(HCA_ENGINE + ".")) {
                                wrong.add(root.relativize(f).toString());
                            }
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        assertTrue(wrong.isEmpty(), "tests and benchmarks naming " + HCA_ENGINE + " outside hca-sim:\n  " + String.join("\n  ", wrong));
    }

    static final String DPA_ISA = "org.peerdirect.hca.dpa.isa";

    /** What the DPA's ISA may use: itself, {@code java.lang}, the OSGi annotations. */
    static final Set<String> DPA_ISA_MAY_USE = Set.of(DPA_ISA, "java.lang", "org.osgi.annotation.bundle",
            "org.osgi.annotation.versioning");

    @Test
    void theDpaIsaImportsNothingOfTheHost() {
        check("dpa-isa-no-host", (from, d) -> d.getOriginClass().getPackageName().equals(DPA_ISA)
                && !d.getTargetClass().isPrimitive() && !d.getTargetClass().isArray()
                && !DPA_ISA_MAY_USE.contains(d.getTargetClass().getPackageName()));
    }

    @Test
    void deviceLibrariesSeeOnlyTheIsa() {
        check("device-library-isa-only", (from, d) -> DEVICE_LIBRARIES.contains(from.module())
                && !d.getTargetClass().isPrimitive() && !d.getTargetClass().isArray()
                && !d.getTargetClass().getPackageName().startsWith("org.peerdirect.flexio.dev")
                && !d.getTargetClass().getPackageName().startsWith("org.peerdirect.doca.dpa.dev")
                && !DPA_ISA_MAY_USE.contains(d.getTargetClass().getPackageName()));
    }

    /** The device side of a PCI function: what a model uses, never its driver (the back doors issue 41 closed). */
    static final Set<String> DEVICE_SIDE = Set.of("firmware", "barMemory", "barAperture", "dmaPort", "raiseMsix");

    @Test
    void driversUseOnlyTheDriverSideOfTheirPciFunction() {
        List<String> wrong = new ArrayList<>();
        for (JavaClass c : classes) {
            Bundles.Bundle from = bundleOfClass.get(c.getName());
            if (from == null || !DRIVERS.contains(from.module())) {
                continue;
            }
            c.getMethodCallsFromSelf().stream()
                    .filter(call -> call.getTargetOwner().getName().equals("org.peerdirect.kernel.pci.PciFunction")
                            && DEVICE_SIDE.contains(call.getName()))
                    .forEach(call -> wrong.add(from + "|" + call.getName() + ": " + call.getDescription()));
        }
        List<String> report = new ArrayList<>(wrong.stream().filter(w -> !KNOWN.containsKey("device-side|" + w.substring(0, w.indexOf(':')))).toList());
        KNOWN.keySet().stream().filter(k -> k.startsWith("device-side|") && wrong.stream().noneMatch(w -> k.equals("device-side|" + w.substring(0, w.indexOf(':')))))
                .forEach(k -> report.add(k + ": listed as known but no longer happens; remove it from KNOWN"));
        assertTrue(report.isEmpty(), "drivers calling the device side of PciFunction:\n  " + String.join("\n  ", report));
    }

    @Test
    void noBundleUsesAnotherBundlesPrivatePackages() {
        check("no-private-packages", (from, d) -> {
            String pkg = d.getTargetClass().getPackageName();
            Bundles.Bundle to = bundleOfPackage.get(pkg);
            return to != null && to != from && !to.exports(pkg);
        });
    }

    @Test
    void userLibrariesNeverImportTheKernelSideOfTheirDriver() {
        check("user-library-not-kernel", (from, d) -> {
            String src = d.getOriginClass().getPackageName();
            String pkg = d.getTargetClass().getPackageName();
            return !DPA_DEVICE_LIBRARIES.contains(src) && USER_LIBRARIES.entrySet().stream().anyMatch(e -> inPackage(src, e.getKey())
                    && e.getValue().stream().anyMatch(k -> inPackage(pkg, k)));
        });
    }

    @Test
    void releasedApiDependsOnNoUnreleasedPackage() {
        check("released-api", (from, d) -> {
            String src = d.getOriginClass().getPackageName();
            String pkg = d.getTargetClass().getPackageName();
            Bundles.Bundle to = bundleOfPackage.get(pkg);
            return from.major(src) >= 1 && to != null && !pkg.equals(src) && to.major(pkg) < 1;
        });
    }

    @Test
    void noTestSitsInAnotherModulesPackage() {
        Path root = Path.of(System.getProperty("user.dir")).getParent();
        Map<String, String> mainPackageOwner = new TreeMap<>();
        for (String m : MODULES) {
            packages(root.resolve(m).resolve("src/main/java")).forEach(p -> mainPackageOwner.put(p, m));
        }
        assertTrue(mainPackageOwner.size() > 20, "main packages found under " + root + ": " + mainPackageOwner.size());
        List<String> wrong = new ArrayList<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path m : modules.filter(p -> Files.isDirectory(p.resolve("src/test/java"))).sorted().toList()) {
                String module = m.getFileName().toString();
                for (String p : packages(m.resolve("src/test/java"))) {
                    String owner = mainPackageOwner.get(p);
                    if (owner != null && !owner.equals(module)) {
                        wrong.add(module + " tests in " + owner + "'s package " + p);
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<String> report = new ArrayList<>(wrong.stream().filter(w -> !KNOWN_TEST_PLACES.containsKey(w)).toList());
        KNOWN_TEST_PLACES.keySet().stream().filter(k -> !wrong.contains(k))
                .forEach(k -> report.add(k + ": listed as known but no longer happens; remove it from KNOWN_TEST_PLACES"));
        assertTrue(report.isEmpty(), "tests placed in another module's package:\n  " + String.join("\n  ", report));
    }

    // ---------------------------------------------------------------- machinery

    interface Breaks {
        boolean test(Bundles.Bundle from, Dependency d);
    }

    /** Collects every dependency {@code breaks} flags, subtracts the known ones, fails naming the rest. */
    private static void check(String rule, Breaks breaks) {
        Map<String, List<String>> byKey = new TreeMap<>();
        for (JavaClass c : classes) {
            Bundles.Bundle from = bundleOfClass.get(c.getName());
            if (from == null) {
                continue;
            }
            for (Dependency d : c.getDirectDependenciesFromSelf()) {
                if (breaks.test(from, d)) {
                    String key = rule + "|" + from.module() + "|" + d.getTargetClass().getPackageName();
                    byKey.computeIfAbsent(key, k -> new ArrayList<>())
                            .add(c.getName() + " -> " + d.getTargetClass().getName());
                }
            }
        }
        List<String> report = new ArrayList<>();
        byKey.forEach((key, lines) -> {
            if (!KNOWN.containsKey(key)) {
                report.add(key + " (" + lines.size() + "):\n      " + lines.stream().distinct().limit(8).collect(Collectors.joining("\n      ")));
            }
        });
        KNOWN.keySet().stream().filter(k -> k.startsWith(rule + "|") && !byKey.containsKey(k))
                .forEach(k -> report.add(k + ": listed as known but no longer happens; remove it from KNOWN"));
        assertTrue(report.isEmpty(), rule + " broken:\n  " + String.join("\n  ", report));
    }

    private static JavaClasses importOne(ClassFileImporter importer, Path location) {
        return importer.importLocations(List.of(location(location)));
    }

    /** A jar's location must be a jar: URI for ArchUnit to read inside it. */
    private static Location location(Path p) {
        if (Files.isDirectory(p)) {
            return Location.of(p);
        }
        return Location.of(java.net.URI.create("jar:" + p.toUri() + "!/"));
    }

    private static boolean inPackage(String pkg, String root) {
        return pkg.equals(root) || pkg.startsWith(root + ".");
    }

    /** Java packages with at least one .java file under {@code src}. */
    private static Set<String> packages(Path src) {
        if (!Files.isDirectory(src)) {
            return Set.of();
        }
        Predicate<Path> java = p -> p.toString().endsWith(".java") && !p.getFileName().toString().equals("package-info.java");
        try (Stream<Path> files = Files.walk(src)) {
            return files.filter(java).map(p -> src.relativize(p.getParent()).toString().replace('/', '.'))
                    .collect(Collectors.toCollection(TreeSet::new));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
