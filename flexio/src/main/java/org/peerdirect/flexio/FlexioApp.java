package org.peerdirect.flexio;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * {@code struct flexio_app}: a DPA application as DPACC builds it, an image (the device's
 * executable, the model's counterpart of the DPA ELF) and its registered entry points.
 * {@code flexio_process_create} loads the image into a new process; the process's loader verifies
 * it and refuses it with a named rule.
 *
 * <p>Immutable; the image bytes are copied in and out.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_app_create, flexio_app_get_elf</a>
 */
public final class FlexioApp {

    /** Where {@code dpacc} puts an application's image among the host classes: {@code META-INF/dpa/<name>.dpaimg}. */
    public static final String IMAGE_RESOURCE_DIR = "META-INF/dpa/";
    public static final String IMAGE_SUFFIX = ".dpaimg";

    private final String name;
    private final byte[] image;
    private final Map<String, FlexioFunc> funcs = new LinkedHashMap<>();

    private FlexioApp(String name, byte[] image, List<FlexioFunc> funcs) {
        this.name = Objects.requireNonNull(name, "name");
        this.image = Objects.requireNonNull(image, "image").clone();
        for (FlexioFunc f : funcs) {
            if (this.funcs.putIfAbsent(f.name(), f) != null) {
                throw new IllegalArgumentException("entry point " + f.name() + " registered twice in app " + name);
            }
        }
    }

    /** {@code flexio_app_create} with every {@code flexio_func_register}/{@code _pup_register} of the app. */
    public static FlexioApp create(String name, byte[] image, List<FlexioFunc> funcs) {
        return new FlexioApp(name, image, funcs);
    }

    /**
     * The image {@code dpacc} stored beside {@code anchor}'s classes ({@link #IMAGE_RESOURCE_DIR}{@code name}{@link #IMAGE_SUFFIX}).
     *
     * @throws IllegalStateException naming the resource when the build did not produce it
     */
    public static FlexioApp fromResource(Class<?> anchor, String name, List<FlexioFunc> funcs) {
        String res = IMAGE_RESOURCE_DIR + name + IMAGE_SUFFIX;
        ClassLoader cl = anchor.getClassLoader();
        try (InputStream in = cl == null ? null : cl.getResourceAsStream(res)) {
            if (in == null) {
                throw new IllegalStateException("no DPA image " + res + " beside " + anchor.getName()
                        + " (was the module built with dpacc?)");
            }
            return new FlexioApp(name, in.readAllBytes(), funcs);
        } catch (IOException e) {
            throw new UncheckedIOException("reading DPA image " + res, e);
        }
    }

    /** The application's name ({@code flexio_app_get_name}). */
    public String name() {
        return name;
    }

    /** A copy of the image ({@code flexio_app_get_elf}). */
    public byte[] image() {
        return image.clone();
    }

    public int imageSize() {
        return image.length;
    }

    /** The registered entry points, in registration order. */
    public List<FlexioFunc> funcs() {
        return List.copyOf(funcs.values());
    }

    /**
     * @throws IllegalArgumentException naming the symbol when the app registered no such entry point
     */
    public FlexioFunc func(String symbol) {
        FlexioFunc f = funcs.get(symbol);
        if (f == null) {
            throw new IllegalArgumentException("app " + name + " has no entry point " + symbol + " (it has " + funcs.keySet() + ")");
        }
        return f;
    }

    @Override
    public String toString() {
        return "flexio app " + name + " (" + image.length + " B image, " + funcs.size() + " entry points)";
    }
}
