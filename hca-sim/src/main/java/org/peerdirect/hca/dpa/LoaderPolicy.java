package org.peerdirect.hca.dpa;

import java.util.Map;
import java.util.Set;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * What DPA code may see outside its image: the {@code java.lang} allowlist (internal names) and
 * the packages of the device libraries with the loader that has them ({@code hca.dpa.isa} always;
 * {@code org.peerdirect.flexio.dev} and the DOCA device library when those bundles exist).
 */
public record LoaderPolicy(Set<String> javaLang, Map<String, ClassLoader> packages) {

    public static final String ISA = "org/peerdirect/hca/dpa/isa/";

    /** Classes of {@code java.lang} (and the bootstraps javac emits for records, lambdas, concatenation). */
    public static final Set<String> JAVA_LANG = Set.of("java/lang/Object", "java/lang/String", "java/lang/Math",
            "java/lang/StrictMath", "java/lang/Integer", "java/lang/Long", "java/lang/Short", "java/lang/Byte",
            "java/lang/Character", "java/lang/Boolean", "java/lang/Number", "java/lang/Record", "java/lang/Comparable",
            "java/lang/CharSequence", "java/lang/StringBuilder", "java/lang/Void", "java/lang/RuntimeException",
            "java/lang/Exception", "java/lang/IllegalArgumentException", "java/lang/IllegalStateException",
            "java/lang/ArithmeticException", "java/lang/IndexOutOfBoundsException",
            "java/lang/ArrayIndexOutOfBoundsException", "java/lang/NullPointerException",
            "java/lang/UnsupportedOperationException", "java/lang/invoke/LambdaMetafactory",
            "java/lang/invoke/StringConcatFactory", "java/lang/runtime/ObjectMethods");

    /** The ISA only. */
    public static LoaderPolicy isaOnly() {
        return new LoaderPolicy(JAVA_LANG, Map.of(ISA, Dpa.class.getClassLoader()));
    }

    /** This policy plus a device library's package (internal name with a trailing slash) from {@code loader}. */
    public LoaderPolicy with(String pkg, ClassLoader loader) {
        var m = new java.util.HashMap<>(packages);
        m.put(pkg, loader);
        return new LoaderPolicy(javaLang, Map.copyOf(m));
    }

    /** The loader of an allowed library package holding {@code internalName}, or null. */
    ClassLoader libraryOf(String internalName) {
        int slash = internalName.lastIndexOf('/');
        return slash < 0 ? null : packages.get(internalName.substring(0, slash + 1));
    }
}
