package org.peerdirect.hca.dpa;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Map;

/**
 * A DPA process's class loader: it defines the image's classes (so each process has its own
 * statics, its data and BSS) and sees beyond them only what {@link LoaderPolicy} allows. Released
 * with the process: nothing but the process refers to it, and a test checks it becomes
 * unreachable.
 */
final class ImageLoader extends ClassLoader {

    static {
        registerAsParallelCapable();
    }

    /** The prefix of every image loader's name ({@code dpa-process-<id>}). */
    static final String NAME = "dpa-process-";

    private final Map<String, byte[]> classes;

    ImageLoader(String name, Image image, LoaderPolicy policy) {
        super(name, new Allowlist(policy));
        this.classes = image.classes();
    }

    @Override
    protected Class<?> findClass(String name) throws ClassNotFoundException {
        byte[] b = classes.get(name);
        if (b == null) {
            throw new ClassNotFoundException(name + " is not in the DPA image");
        }
        return defineClass(name, b, 0, b.length);
    }

    /**
     * The RPC entries of {@code image} by symbol-table index ({@code null} for a symbol that is not
     * an RPC entry). Every symbol is resolved: each must name a static method of the right shape.
     */
    MethodHandle[] rpcEntries(Image image) throws ImageRejected {
        MethodHandle[] rpcEntries = new MethodHandle[image.symbols().size()];
        int index = 0;
        for (Image.Symbol s : image.symbols().values()) {
            MethodHandle h = entry(s);
            rpcEntries[index++] = s.rpc() ? h : null;
        }
        return rpcEntries;
    }

    /** The public static method symbol {@code s} names: {@code long f(long)} for an RPC entry, else {@code void f(long)}. */
    MethodHandle entry(Image.Symbol s) throws ImageRejected {
        try {
            Class<?> c = loadClass(s.className());
            MethodType t = s.rpc() ? MethodType.methodType(long.class, long.class) : MethodType.methodType(void.class, long.class);
            return MethodHandles.publicLookup().findStatic(c, s.method(), t);
        } catch (ReflectiveOperationException | LinkageError e) {
            throw new ImageRejected("malformed-image", "symbol " + s.name(), "no public static " + (s.rpc() ? "long " : "void ")
                    + s.className() + "." + s.method() + "(long): " + e);
        }
    }

    /** The parent: the allowlisted JDK classes and device-library packages, nothing else. */
    private static final class Allowlist extends ClassLoader {
        private final LoaderPolicy policy;

        Allowlist(LoaderPolicy policy) {
            super("dpa-allowlist", null);
            this.policy = policy;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            String internal = name.replace('.', '/');
            if (policy.javaLang().contains(internal)) {
                return Class.forName(name, false, null);
            }
            ClassLoader lib = policy.libraryOf(internal);
            if (lib != null) {
                return lib.loadClass(name);
            }
            throw new ClassNotFoundException(name + " is not visible to DPA code");
        }
    }
}
