package org.peerdirect.dpacc.link;

import java.io.IOException;
import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.FieldModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.NameAndTypeEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.lang.constant.ClassDesc;
import java.lang.constant.MethodTypeDesc;
import java.net.JarURLConnection;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

import org.peerdirect.hca.dpa.ImagePackager;
import org.peerdirect.hca.dpa.ImageRejected;
import org.peerdirect.hca.dpa.LoaderPolicy;

/**
 * DPACC's back end: links each app the processor described ({@code META-INF/dpa/*.dpaapp} under
 * {@code --classes}) into {@code META-INF/dpa/<name>.dpaimg} there, then verifies the image with
 * the silicon's own verifier, so a rule broken fails the build naming the rule, class and member.
 *
 * <p>Linking is static and by reachability, as a C linker takes objects from {@code .a} archives:
 * from the app class and its trampolines, every class referenced (constant pool, descriptors) that
 * is among the app's classes or in a device library joins the image. A device library is a jar or
 * directory carrying {@value #LIBRARY_MARKER} (flexio-dev, doca-dpa-dev), given with {@code --lib}
 * or found on the context class path (the build's). Anything referenced but found in neither is
 * left to the verifier: the ISA and the {@code java.lang} allowlist pass, host classes are refused.
 *
 * <pre>
 * java org.peerdirect.dpacc.link.Dpacc --classes DIR [--lib JAR|DIR]... [--no-classpath-libs]
 * </pre>
 */
public final class Dpacc {

    /** The resource marking a jar or directory as a statically linked device library. */
    public static final String LIBRARY_MARKER = "META-INF/dpa-device-library";

    private Dpacc() {
    }

    public static void main(String[] args) throws DpaccException, IOException {
        Path classes = null;
        List<Path> libs = new ArrayList<>();
        boolean classpathLibs = true;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--classes" -> classes = Path.of(value(args, ++i));
                case "--lib" -> libs.add(Path.of(value(args, ++i)));
                case "--no-classpath-libs" -> classpathLibs = false;
                default -> throw new IllegalArgumentException("dpacc: unknown argument " + args[i]
                        + " (usage: --classes DIR [--lib JAR|DIR]... [--no-classpath-libs])");
            }
        }
        if (classes == null) {
            throw new IllegalArgumentException("dpacc: --classes DIR is required");
        }
        if (classpathLibs) {
            libs.addAll(classpathLibraries(Thread.currentThread().getContextClassLoader()));
        }
        for (Path img : link(classes, libs)) {
            System.out.println("dpacc: " + classes.relativize(img) + " (" + Files.size(img) + " bytes)");
        }
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException("dpacc: " + args[i - 1] + " needs a value");
        }
        return args[i];
    }

    /**
     * Links every app described under {@code classes}; a directory without descriptors links
     * nothing (a module without DPA code).
     *
     * @return the images written
     */
    public static List<Path> link(Path classes, List<Path> libraries) throws DpaccException, IOException {
        Path dir = classes.resolve(AppDescriptor.DIR);
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        List<Path> descriptors;
        try (Stream<Path> s = Files.list(dir)) {
            descriptors = s.filter(p -> p.toString().endsWith(AppDescriptor.SUFFIX)).sorted().toList();
        }
        List<Path> out = new ArrayList<>();
        List<ClassPath> libs = new ArrayList<>();
        try (ClassPath app = new ClassPath(classes)) {
            for (Path l : new LinkedHashSet<>(libraries)) {
                if (!l.toAbsolutePath().normalize().equals(classes.toAbsolutePath().normalize())) {
                    libs.add(new ClassPath(l));
                }
            }
            for (Path d : descriptors) {
                AppDescriptor desc;
                try (InputStream in = Files.newInputStream(d)) {
                    desc = AppDescriptor.parse(in, d.toString());
                }
                Path img = dir.resolve(desc.name() + AppDescriptor.IMAGE_SUFFIX);
                Files.deleteIfExists(img); // a refused app leaves no image of an earlier build behind
                Files.write(img, image(desc, app, libs));
                out.add(img);
            }
        } finally {
            for (ClassPath l : libs) {
                l.close();
            }
        }
        return out;
    }

    /** Links one app and verifies it under the ISA-only policy the firmware loads processes with. */
    static byte[] image(AppDescriptor desc, ClassPath app, List<ClassPath> libs) throws DpaccException, IOException {
        Map<String, byte[]> linked = closure(desc, app, libs);
        ImagePackager p = new ImagePackager();
        linked.forEach((internal, bytes) -> p.add(internal.replace('/', '.'), bytes));
        for (AppDescriptor.Symbol s : desc.symbols()) {
            p.entry(new ImagePackager.Entry(s.name(), s.rpc(), s.argbufSize(), desc.trampolines(), s.name()));
        }
        if (linked.containsKey(RPC_HANDLER_CLASS)) { // flexio-dev's runtime entry: flexio_process_call's device half
            p.entry(new ImagePackager.Entry(RPC_HANDLER_SYMBOL, false, 8, RPC_HANDLER_CLASS.replace('/', '.'), "rpcHandler"));
        }
        if (linked.containsKey(KERNEL_RUNTIME_CLASS)) { // doca-dpa-dev's kernel launch runtime, and each kernel as its call target
            String rt = KERNEL_RUNTIME_CLASS.replace('/', '.');
            p.entry(new ImagePackager.Entry("doca_dpa_dev_kernel_rank", false, 8, rt, "rankHandler"));
            p.entry(new ImagePackager.Entry("doca_dpa_dev_kernel_start", true, 8, rt, "kernelStart"));
            p.entry(new ImagePackager.Entry("doca_dpa_dev_kernel_dispatch", false, 8, rt, "dispatchHandler"));
            p.entry(new ImagePackager.Entry("doca_dpa_dev_kernel_kick", true, 8, rt, "kernelKick"));
            Set<String> methods = methodNames(app.find(desc.trampolines().replace('.', '/')));
            for (AppDescriptor.Symbol s : desc.symbols()) {
                // trampolines compiled by an older processor lack the method: no entry (a launch then names what is missing)
                if (!s.rpc() && methods.contains(s.name() + LAUNCH_SUFFIX)) {
                    p.entry(new ImagePackager.Entry(s.name() + LAUNCH_SUFFIX, true, 8, desc.trampolines(), s.name() + LAUNCH_SUFFIX));
                }
            }
        }
        byte[] image = p.pack();
        try {
            ImagePackager.verify(image, LoaderPolicy.isaOnly());
        } catch (ImageRejected e) {
            throw new DpaccException("dpacc: DPA app " + desc.name() + " (" + desc.appClass() + "): " + e.getMessage(), e.rule);
        }
        return image;
    }

    /**
     * flexio-dev's RPC handler ({@code org.peerdirect.flexio.dev.FlexioDevRpc}): a runtime entry
     * every image linking flexio-dev carries under {@value #RPC_HANDLER_SYMBOL}, as libflexio_dev's
     * own RPC handler is in every DPACC image (named by string: dpacc does not depend on flexio-dev).
     */
    static final String RPC_HANDLER_CLASS = "org/peerdirect/flexio/dev/FlexioDevRpc";
    static final String RPC_HANDLER_SYMBOL = "flexio_dev_rpc_handler";

    /**
     * doca-dpa-dev's kernel launch runtime ({@code org.peerdirect.doca.dpa.dev.DocaDpaDevKernel}):
     * linked with doca-dpa-dev, its rank handler and start RPC become entries, and each kernel's
     * launch trampoline ({@code <kernel>}{@value #LAUNCH_SUFFIX}, generated with the trampolines) an
     * RPC-kind entry its rank handler calls by symbol (named by string: dpacc does not depend on it).
     */
    static final String KERNEL_RUNTIME_CLASS = "org/peerdirect/doca/dpa/dev/DocaDpaDevKernel";
    static final String KERNEL_RUNTIME_LIBRARY_PACKAGE = "org/peerdirect/doca/dpa/dev/";
    static final String LAUNCH_SUFFIX = "__launch";

    private static byte[] findIn(List<ClassPath> libs, String internal) throws IOException {
        for (ClassPath l : libs) {
            byte[] b = l.find(internal);
            if (b != null) {
                return b;
            }
        }
        return null;
    }

    /** The classes reachable from the app class and its trampolines, app classes first found, in discovery order. */
    private static Map<String, byte[]> closure(AppDescriptor desc, ClassPath app, List<ClassPath> libs)
            throws DpaccException, IOException {
        Map<String, byte[]> linked = new LinkedHashMap<>();
        Set<String> seen = new LinkedHashSet<>();
        Deque<String> todo = new ArrayDeque<>();
        for (String root : List.of(desc.appClass(), desc.trampolines())) {
            String internal = root.replace('.', '/');
            if (app.find(internal) == null) {
                throw new DpaccException("dpacc: DPA app " + desc.name() + ": class " + root + " is not in " + app
                        + " (was it compiled with the dpacc processor?)", null);
            }
            seen.add(internal);
            todo.add(internal);
        }
        if (findIn(libs, RPC_HANDLER_CLASS) != null) { // linked whenever flexio-dev is: the host's flexio_process_call needs it
            seen.add(RPC_HANDLER_CLASS);
            todo.add(RPC_HANDLER_CLASS);
        }
        closeOver(linked, seen, todo, app, libs);
        // the kernel runtime joins an image whose code uses doca-dpa-dev (a DOCA DPA app), with what it references
        if (!linked.containsKey(KERNEL_RUNTIME_CLASS) && findIn(libs, KERNEL_RUNTIME_CLASS) != null
                && linked.keySet().stream().anyMatch(c -> c.startsWith(KERNEL_RUNTIME_LIBRARY_PACKAGE))) {
            seen.add(KERNEL_RUNTIME_CLASS);
            todo.add(KERNEL_RUNTIME_CLASS);
            closeOver(linked, seen, todo, app, libs);
        }
        return linked;
    }

    /** Adds to {@code linked} every class of the app or a library reachable from {@code todo}. */
    private static void closeOver(Map<String, byte[]> linked, Set<String> seen, Deque<String> todo, ClassPath app, List<ClassPath> libs)
            throws DpaccException, IOException {
        while (!todo.isEmpty()) {
            String c = todo.poll();
            byte[] bytes = app.find(c);
            for (int i = 0; bytes == null && i < libs.size(); i++) {
                bytes = libs.get(i).find(c);
            }
            if (bytes == null) {
                continue; // JDK, ISA or a host class: the verifier decides
            }
            linked.put(c, bytes);
            for (String r : references(bytes, c)) {
                if (seen.add(r)) {
                    todo.add(r);
                }
            }
        }
    }

    /** The names of a class file's methods. */
    static Set<String> methodNames(byte[] classFile) {
        Set<String> names = new LinkedHashSet<>();
        for (MethodModel m : ClassFile.of().parse(classFile).methods()) {
            names.add(m.methodName().stringValue());
        }
        return names;
    }

    /** Every class a class file names: its constant pool's classes and the types in its descriptors. */
    static Set<String> references(byte[] classFile, String name) throws DpaccException {
        ClassModel cm;
        try {
            cm = ClassFile.of().parse(classFile);
        } catch (IllegalArgumentException e) {
            throw new DpaccException("dpacc: " + name + " is not a class file: " + e.getMessage(), "malformed-class");
        }
        Set<String> refs = new LinkedHashSet<>();
        for (PoolEntry e : cm.constantPool()) {
            switch (e) {
                case ClassEntry c -> type(refs, c.asSymbol());
                case NameAndTypeEntry nt -> descriptor(refs, nt.type().stringValue());
                default -> {
                }
            }
        }
        for (FieldModel f : cm.fields()) {
            type(refs, f.fieldTypeSymbol());
        }
        for (MethodModel m : cm.methods()) {
            descriptor(refs, m.methodType().stringValue());
        }
        return refs;
    }

    private static void descriptor(Set<String> refs, String d) {
        if (d.startsWith("(")) {
            MethodTypeDesc t = MethodTypeDesc.ofDescriptor(d);
            type(refs, t.returnType());
            t.parameterList().forEach(p -> type(refs, p));
        } else {
            type(refs, ClassDesc.ofDescriptor(d));
        }
    }

    private static void type(Set<String> refs, ClassDesc d) {
        while (d.isArray()) {
            d = d.componentType();
        }
        if (d.isClassOrInterface()) {
            String s = d.descriptorString();
            refs.add(s.substring(1, s.length() - 1));
        }
    }

    /** The roots of every device library {@code loader} sees (by their marker). */
    static List<Path> classpathLibraries(ClassLoader loader) throws IOException {
        List<Path> roots = new ArrayList<>();
        if (loader == null) {
            return roots;
        }
        Enumeration<URL> markers = loader.getResources(LIBRARY_MARKER);
        while (markers.hasMoreElements()) {
            URL u = markers.nextElement();
            try {
                if (u.getProtocol().equals("jar")) {
                    roots.add(Path.of(((JarURLConnection) u.openConnection()).getJarFileURL().toURI()));
                } else if (u.getProtocol().equals("file")) {
                    roots.add(Path.of(u.toURI()).getParent().getParent());
                }
            } catch (URISyntaxException e) {
                throw new IOException("dpacc: device library marker at " + u + ": " + e.getMessage(), e);
            }
        }
        return roots;
    }
}
