package org.peerdirect.hca.dpa;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds {@link Image} bytes: the tests' packager and {@code dpacc}'s back end (it hands class
 * files and symbols it derived from the annotations, then {@link #verify}s the result at build time).
 */
public final class ImagePackager {

    /** An entry point to put in the symbol table. */
    public record Entry(String name, boolean rpc, int argbufSize, String className, String method) {
    }

    private final Map<String, byte[]> classes = new LinkedHashMap<>();
    private final List<Entry> entries = new java.util.ArrayList<>();

    /** Adds a class file under its binary name. */
    public ImagePackager add(String binaryName, byte[] classFile) {
        classes.put(binaryName, classFile.clone());
        return this;
    }

    /** Adds a class by reading its class file from its own loader (a build-time or test convenience). */
    public ImagePackager add(Class<?> c) {
        String res = c.getName().substring(c.getName().lastIndexOf('.') + 1) + ".class";
        try (InputStream in = c.getResourceAsStream(res)) {
            if (in == null) {
                throw new IllegalArgumentException("no class file for " + c.getName());
            }
            return add(c.getName(), in.readAllBytes());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A {@code __dpa_global__} handler {@code static void method(long)} of {@code c}. */
    public ImagePackager global(String name, Class<?> c, String method) {
        entries.add(new Entry(name, false, 8, c.getName(), method));
        return this;
    }

    /** A {@code __dpa_rpc__} {@code static long method(long argbuf)} of {@code c}. */
    public ImagePackager rpc(String name, Class<?> c, String method, int argbufSize) {
        entries.add(new Entry(name, true, argbufSize, c.getName(), method));
        return this;
    }

    public ImagePackager entry(Entry e) {
        entries.add(e);
        return this;
    }

    public byte[] pack() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(Image.MAGIC);
        out.writeBytes(le(classes.size()));
        for (Map.Entry<String, byte[]> c : classes.entrySet()) {
            str(out, c.getKey());
            out.writeBytes(le(c.getValue().length));
            out.writeBytes(c.getValue());
        }
        out.writeBytes(le(entries.size()));
        for (Entry e : entries) {
            str(out, e.name());
            out.write(e.rpc() ? Image.RPC : Image.GLOBAL);
            out.writeBytes(le(e.argbufSize()));
            str(out, e.className());
            str(out, e.method());
        }
        return out.toByteArray();
    }

    /**
     * The loader's checks at build time ({@code dpacc}): parses {@code image} and runs the
     * {@link Verifier} under {@code policy}, exactly as {@code CREATE_GENERAL_OBJECT(DPA_PROCESS)}
     * will, so a broken rule fails the build instead of the process creation.
     *
     * @throws ImageRejected naming the rule, the class and the member
     */
    public static void verify(byte[] image, LoaderPolicy policy) throws ImageRejected {
        new Verifier(Image.parse(java.lang.foreign.MemorySegment.ofArray(image)), policy).verify();
    }

    private static byte[] le(int v) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).array();
    }

    private static void str(ByteArrayOutputStream out, String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        out.write(b.length & 0xff);
        out.write(b.length >>> 8);
        out.writeBytes(b);
    }
}
