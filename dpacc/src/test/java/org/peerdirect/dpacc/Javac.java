package org.peerdirect.dpacc;

import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

import org.peerdirect.dpacc.processor.DpaccProcessor;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * javac in the test, with dpacc's processor: sources as strings, classes and generated sources
 * into a directory, the diagnostics kept. The class path is the jars/directories of the ISA,
 * the annotations and flexio (what a user's device module compiles against) plus {@code extra}.
 */
final class Javac {

    /** The outcome: compiled or not, and every diagnostic. */
    record Result(boolean ok, List<Diagnostic<? extends JavaFileObject>> diagnostics, Path classes, Path generated) {

        List<Diagnostic<? extends JavaFileObject>> errors() {
            return diagnostics.stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR).toList();
        }
    }

    static Result compile(Path dir, Map<String, String> sources, Path... extra) throws IOException {
        Path src = Files.createDirectories(dir.resolve("src"));
        Path classes = Files.createDirectories(dir.resolve("classes"));
        Path gen = Files.createDirectories(dir.resolve("generated"));
        List<File> files = new ArrayList<>();
        for (var s : sources.entrySet()) {
            Path f = src.resolve(s.getKey().replace('.', '/') + ".java");
            Files.createDirectories(f.getParent());
            Files.writeString(f, s.getValue());
            files.add(f.toFile());
        }
        List<String> cp = new ArrayList<>(List.of(where(Dpa.class), where(DpaApp.class), where(FlexioApp.class)));
        for (Path p : extra) {
            cp.add(p.toString());
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diags = new DiagnosticCollector<>();
        try (StandardJavaFileManager fm = javac.getStandardFileManager(diags, null, null)) {
            var task = javac.getTask(null, fm, diags, List.of("--release", "25", "-d", classes.toString(), "-s", gen.toString(),
                    "-classpath", String.join(File.pathSeparator, cp)), null, fm.getJavaFileObjectsFromFiles(files));
            task.setProcessors(List.of(new DpaccProcessor()));
            boolean ok = task.call();
            return new Result(ok, diags.getDiagnostics(), classes, gen);
        }
    }

    private static String where(Class<?> c) {
        try {
            return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }
}
