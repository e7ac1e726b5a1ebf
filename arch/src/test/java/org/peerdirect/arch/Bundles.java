package org.peerdirect.arch;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

/**
 * The project's bundles as the build made them: every class-path entry (a jar, or a module's
 * {@code target/classes} when Maven stops before {@code package}) whose manifest names a
 * {@code org.peerdirect.*} Bundle-SymbolicName, with the packages it exports and their versions
 * read from {@code Export-Package} (what bnd computed from the {@code package-info.java}
 * annotations, so the rules judge what OSGi resolves, not what the sources intend).
 */
record Bundles(List<Bundle> all) {

    /** One bundle: its module name (the BSN without {@code org.peerdirect.}), where it is, its exports. */
    record Bundle(String module, Path location, Map<String, int[]> exports) {

        boolean exports(String pkg) {
            return exports.containsKey(pkg);
        }

        /** The major version of an exported package, or -1 when the package is private. */
        int major(String pkg) {
            int[] v = exports.get(pkg);
            return v == null ? -1 : v[0];
        }

        @Override
        public String toString() {
            return module;
        }
    }

    static Bundles fromClassPath() {
        List<Bundle> found = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path p = Path.of(entry);
            manifest(p).ifPresent(m -> {
                String bsn = m.getMainAttributes().getValue("Bundle-SymbolicName");
                if (bsn != null && bsn.startsWith("org.peerdirect.")) {
                    String module = bsn.substring("org.peerdirect.".length()).split(";")[0].trim();
                    if (module.equals("arch")) {
                        return; // this module's own (empty) bundle
                    }
                    found.add(new Bundle(module, p, exports(m.getMainAttributes().getValue("Export-Package"))));
                }
            });
        }
        return new Bundles(List.copyOf(found));
    }

    Optional<Bundle> named(String module) {
        return all.stream().filter(b -> b.module().equals(module)).findFirst();
    }

    private static Optional<Manifest> manifest(Path p) {
        try {
            if (Files.isDirectory(p)) {
                Path mf = p.resolve("META-INF/MANIFEST.MF");
                if (!Files.isRegularFile(mf)) {
                    return Optional.empty();
                }
                try (InputStream in = Files.newInputStream(mf)) {
                    return Optional.of(new Manifest(in));
                }
            }
            if (!p.toString().endsWith(".jar") || !Files.isRegularFile(p)) {
                return Optional.empty();
            }
            try (JarFile jar = new JarFile(p.toFile())) {
                return Optional.ofNullable(jar.getManifest());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("reading the manifest of " + p, e);
        }
    }

    /**
     * Parses an OSGi {@code Export-Package} header into package → {major, minor, micro}. Clauses
     * are split at commas outside quotes; a clause is {@code pkg;attr=value;directive:=value}.
     */
    static Map<String, int[]> exports(String header) {
        Map<String, int[]> out = new LinkedHashMap<>();
        if (header == null) {
            return out;
        }
        for (String clause : splitOutsideQuotes(header, ',')) {
            List<String> parts = splitOutsideQuotes(clause, ';');
            int[] version = {0, 0, 0};
            List<String> names = new ArrayList<>();
            for (String part : parts) {
                String t = part.trim();
                if (t.startsWith("version=")) {
                    String[] v = t.substring("version=".length()).replace("\"", "").split("\\.");
                    for (int i = 0; i < Math.min(3, v.length); i++) {
                        version[i] = Integer.parseInt(v[i]);
                    }
                } else if (!t.contains("=")) {
                    names.add(t);
                }
            }
            for (String n : names) {
                out.put(n, version);
            }
        }
        return out;
    }

    private static List<String> splitOutsideQuotes(String s, char sep) {
        List<String> out = new ArrayList<>();
        boolean quoted = false;
        int start = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"') {
                quoted = !quoted;
            } else if (c == sep && !quoted) {
                out.add(s.substring(start, i));
                start = i + 1;
            }
        }
        out.add(s.substring(start));
        return out;
    }
}
