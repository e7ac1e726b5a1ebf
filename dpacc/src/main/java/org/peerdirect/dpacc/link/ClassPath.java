package org.peerdirect.dpacc.link;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/** One root class files are linked from: a directory of classes or a jar. */
final class ClassPath implements Closeable {

    final Path root;
    private final ZipFile zip;

    ClassPath(Path root) throws IOException {
        this.root = root;
        this.zip = Files.isDirectory(root) ? null : new ZipFile(root.toFile());
    }

    /** The class file of {@code internalName}, or null when this root has none. */
    byte[] find(String internalName) throws IOException {
        String res = internalName + ".class";
        if (zip == null) {
            Path p = root.resolve(res);
            return Files.isRegularFile(p) ? Files.readAllBytes(p) : null;
        }
        ZipEntry e = zip.getEntry(res);
        if (e == null) {
            return null;
        }
        try (InputStream in = zip.getInputStream(e)) {
            return in.readAllBytes();
        }
    }

    @Override
    public void close() throws IOException {
        if (zip != null) {
            zip.close();
        }
    }

    @Override
    public String toString() {
        return root.toString();
    }
}
