package org.peerdirect.dpacc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.dpacc.link.Dpacc;
import org.peerdirect.dpacc.link.DpaccException;

/**
 * The packager: static linking of marked device libraries by reachability, the image running on
 * the silicon, and the verifier's refusals failing the link with the rule, class and member.
 */
class LinkTest {

    @TempDir
    Path dir;

    private static final String LIB = """
            package org.example.devlib;

            import org.peerdirect.hca.dpa.isa.Dpa;

            public final class DevLib {
                private DevLib() { }
                public static long twice(long daddr) { return 2 * Dpa.ld64(daddr); }
            }
            """;
    private static final String UNUSED = """
            package org.example.devlib;

            public final class Unused {
                private Unused() { }
                public static long nothing() { return 0; }
            }
            """;
    private static final String APP = """
            package p;

            import org.example.devlib.DevLib;
            import org.peerdirect.dpacc.*;

            @DpaApp("linked")
            public final class App {
                @DpaRpc static long twiceAt(long daddr) { return DevLib.twice(daddr) + 1; }
            }
            """;

    /** The library compiled into {@code lib/classes}, marked when {@code marked}. */
    private Path library(boolean marked) throws Exception {
        Javac.Result lib = Javac.compile(dir.resolve("lib"), Map.of("org.example.devlib.DevLib", LIB, "org.example.devlib.Unused", UNUSED));
        assertTrue(lib.ok(), lib.diagnostics().toString());
        if (marked) {
            Path m = lib.classes().resolve(Dpacc.LIBRARY_MARKER);
            Files.createDirectories(m.getParent());
            Files.writeString(m, "flexio-dev-like test library\n");
        }
        return lib.classes();
    }

    @Test
    void aMarkedDeviceLibraryIsLinkedStaticallyByReachabilityAndRuns() throws Exception {
        Path lib = library(true);
        Javac.Result app = Javac.compile(dir.resolve("app"), Map.of("p.App", APP), lib);
        assertTrue(app.ok(), app.diagnostics().toString());

        List<Path> images = Dpacc.link(app.classes(), List.of(lib));
        assertEquals(List.of(app.classes().resolve("META-INF/dpa/linked.dpaimg")), images);
        byte[] image = Files.readAllBytes(images.get(0));
        String text = new String(image, StandardCharsets.ISO_8859_1);
        assertTrue(text.contains("org.example.devlib.DevLib"), "the library class it calls is in the image");
        assertFalse(text.contains("org.example.devlib.Unused"), "a library class nothing reaches is not");
        assertFalse(text.contains("p.AppStubs"), "the host stubs are not");

        try (DpaBench dpa = new DpaBench()) {
            int pid = dpa.load(image, 4096);
            long word = dpa.unit.heapBase(pid) + 512;
            dpa.unit.nicWrite(word, java.lang.foreign.MemorySegment.ofArray(new long[] {21}), 0, 8);
            byte[] args = java.lang.foreign.MemorySegment.ofArray(new long[] {word}).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            assertEquals(43, dpa.call(pid, "twiceAt", args));
            dpa.unit.processDestroy(pid);
        }
    }

    @Test
    void theClassPathsMarkedLibrariesAreFound() throws Exception {
        Path marked = library(true);
        Path plain = Files.createDirectories(dir.resolve("plain"));
        try (URLClassLoader l = new URLClassLoader(new URL[] {plain.toUri().toURL(), marked.toUri().toURL()}, null)) {
            Path classes = Files.createDirectories(dir.resolve("none"));
            Files.createDirectories(classes.resolve("META-INF/dpa"));
            Thread t = Thread.currentThread();
            ClassLoader old = t.getContextClassLoader();
            t.setContextClassLoader(l);
            try {
                Dpacc.main(new String[] {"--classes", classes.toString()}); // a module without DPA code links nothing
            } finally {
                t.setContextClassLoader(old);
            }
            try (var files = Files.list(classes.resolve("META-INF/dpa"))) {
                assertEquals(0, files.count());
            }
        }
        Javac.Result app = Javac.compile(dir.resolve("app"), Map.of("p.App", APP), marked);
        try (URLClassLoader l = new URLClassLoader(new URL[] {plain.toUri().toURL(), marked.toUri().toURL()}, null)) {
            Thread t = Thread.currentThread();
            ClassLoader old = t.getContextClassLoader();
            t.setContextClassLoader(l);
            try {
                Dpacc.main(new String[] {"--classes", app.classes().toString()});
            } finally {
                t.setContextClassLoader(old);
            }
        }
        assertTrue(Files.exists(app.classes().resolve("META-INF/dpa/linked.dpaimg")), "linked with the class path's library");
    }

    @Test
    void aLibraryWithoutTheMarkerIsAHostPackageTheVerifierRefuses() throws Exception {
        Path lib = library(false);
        Javac.Result app = Javac.compile(dir.resolve("app"), Map.of("p.App", APP), lib);
        assertTrue(app.ok(), app.diagnostics().toString());
        Path stale = Files.write(app.classes().resolve("META-INF/dpa/linked.dpaimg"), new byte[] {1}); // an earlier build's
        DpaccException e = assertThrows(DpaccException.class, () -> Dpacc.link(app.classes(), List.of()));
        assertEquals("host-package", e.rule);
        assertTrue(e.getMessage().contains("p/App.twiceAt") && e.getMessage().contains("org.example.devlib.DevLib"), e.getMessage());
        assertFalse(Files.exists(stale), "no image when refused, not even an earlier one");
    }

    @Test
    void aMutableStaticFailsTheLinkNamingRuleClassAndField() throws Exception {
        String src = """
                package p;

                import org.peerdirect.dpacc.*;

                @DpaApp("counting")
                public final class Counter {
                    static long count;
                    @DpaRpc static long next() { return ++count; }
                }
                """;
        Javac.Result app = Javac.compile(dir.resolve("app"), Map.of("p.Counter", src));
        assertTrue(app.ok(), app.diagnostics().toString());
        DpaccException e = assertThrows(DpaccException.class, () -> Dpacc.link(app.classes(), List.of()));
        assertEquals("mutable-static", e.rule);
        assertTrue(e.getMessage().contains("rule mutable-static") && e.getMessage().contains("p/Counter.count")
                && e.getMessage().contains("counting"), e.getMessage());
    }

    @Test
    void aHostCallFailsTheLinkNamingRuleClassAndMethod() throws Exception {
        String src = """
                package p;

                import org.peerdirect.dpacc.*;

                @DpaApp("clock")
                public final class Clock {
                    @DpaRpc static long now() { return System.nanoTime(); }
                }
                """;
        Javac.Result app = Javac.compile(dir.resolve("app"), Map.of("p.Clock", src));
        assertTrue(app.ok(), app.diagnostics().toString());
        DpaccException e = assertThrows(DpaccException.class, () -> Dpacc.link(app.classes(), List.of()));
        assertEquals("system", e.rule);
        assertTrue(e.getMessage().contains("p/Clock.now") && e.getMessage().contains("java.lang.System"), e.getMessage());
    }
}
