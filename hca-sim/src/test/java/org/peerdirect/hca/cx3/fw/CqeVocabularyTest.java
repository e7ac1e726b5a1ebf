package org.peerdirect.hca.cx3.fw;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Map;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

/**
 * The ConnectX-3's CQE writer ({@link CqRing}) puts the engine's syndromes into error CQEs as they
 * are, so the engine's {@code MLX4_CQE_SYNDROME_*} copy and the layout package's ({@code cx3.ifc},
 * what the driver reads) must be the same names with the same values.
 */
class CqeVocabularyTest {

    @Test
    void theEnginesSyndromesAreMlx4sSyndromes() throws IllegalAccessException {
        Map<String, Integer> ifc = syndromes(org.peerdirect.hca.cx3.ifc.Cqe.class);
        Map<String, Integer> engine = syndromes(org.peerdirect.hca.engine.Cqe.class);
        assertEquals(13, ifc.size(), "MLX4_CQE_SYNDROME_* in cx3.ifc: " + ifc);
        assertEquals(ifc, engine);
    }

    private static Map<String, Integer> syndromes(Class<?> c) throws IllegalAccessException {
        Map<String, Integer> out = new TreeMap<>();
        for (Field f : c.getFields()) {
            if (f.getName().startsWith("SYNDROME_") && Modifier.isStatic(f.getModifiers()) && f.getType() == int.class) {
                out.put(f.getName(), f.getInt(null));
            }
        }
        return out;
    }
}
