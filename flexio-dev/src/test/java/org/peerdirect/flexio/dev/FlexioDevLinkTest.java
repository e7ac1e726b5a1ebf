package org.peerdirect.flexio.dev;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpa.LoaderPolicy;

/**
 * The library links into DPA images: every class it has names, in its constant pool, only the
 * DPA ISA, its own package and the silicon's {@code java.lang} allowlist ({@link LoaderPolicy}),
 * and has no static field but constants. (The silicon's verifier itself runs on it when the
 * FlexIO host library's tests load images that link it.)
 */
class FlexioDevLinkTest {

    static final List<Class<?>> LIBRARY = List.of(FlexioDev.class, FlexioDevQueue.class, FlexioDevMsg.class);

    @Test
    void referencesOnlyTheIsaAndTheJavaLangAllowlist() throws IOException {
        Set<String> foreign = new TreeSet<>();
        for (Class<?> c : LIBRARY) {
            ClassModel cm;
            try (InputStream in = c.getResourceAsStream(c.getSimpleName() + ".class")) {
                cm = ClassFile.of().parse(in.readAllBytes());
            }
            for (PoolEntry e : cm.constantPool()) {
                if (e instanceof ClassEntry ce) {
                    String n = ce.asInternalName();
                    boolean ok = n.startsWith(LoaderPolicy.ISA) && !n.startsWith(LoaderPolicy.ISA + "Hart")
                            || n.startsWith("org/peerdirect/flexio/dev/") || LoaderPolicy.JAVA_LANG.contains(n);
                    if (!ok) {
                        foreign.add(c.getSimpleName() + " -> " + n);
                    }
                }
            }
            cm.fields().stream().filter(f -> f.flags().has(java.lang.reflect.AccessFlag.STATIC))
                    .forEach(f -> assertTrue(f.flags().has(java.lang.reflect.AccessFlag.FINAL)
                            && !f.fieldTypeSymbol().isArray(), c.getSimpleName() + "." + f.fieldName() + " is mutable"));
        }
        assertEquals(Set.of(), foreign, "device-library classes reach outside the ISA and the allowlist");
    }
}
