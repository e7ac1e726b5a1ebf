package org.peerdirect.dpacc.processor;

import java.util.ArrayList;
import java.util.List;

/**
 * A type that crosses from host to device in an argument buffer, with its C layout: DPA code is
 * RISC-V, little-endian, and DPACC lays a {@code __dpa_rpc__}'s arguments out as the struct of its
 * parameters, each member at the next multiple of its alignment, the struct padded to its own.
 */
sealed interface DType permits DType.Prim, DType.Struct {

    int size();

    int align();

    /** The primitives the argument buffer carries; the load the trampoline reads each with. */
    enum Prim implements DType {
        BYTE(1, "byte"), BOOLEAN(1, "boolean"), SHORT(2, "short"), CHAR(2, "char"), INT(4, "int"), LONG(8, "long");

        private final int size;
        final String java;

        Prim(int size, String java) {
            this.size = size;
            this.java = java;
        }

        @Override
        public int size() {
            return size;
        }

        @Override
        public int align() {
            return size;
        }
    }

    /** One member at its offset from the struct's start. */
    record Member(String name, DType type, int offset) {
    }

    /**
     * A {@code @DpaGlobal} record (or the parameters of an RPC): {@code javaType} is the record's
     * canonical name (null for a parameter list).
     */
    record Struct(String javaType, List<Member> members, int size, int align) implements DType {

        /** Lays {@code fields} out in declaration order (names and types, parallel lists). */
        static Struct layout(String javaType, List<String> names, List<DType> types) {
            List<Member> m = new ArrayList<>();
            int off = 0;
            int align = 1;
            for (int i = 0; i < names.size(); i++) {
                DType t = types.get(i);
                off = roundUp(off, t.align());
                m.add(new Member(names.get(i), t, off));
                off += t.size();
                align = Math.max(align, t.align());
            }
            return new Struct(javaType, List.copyOf(m), roundUp(off, align), align);
        }

        private static int roundUp(int v, int a) {
            return (v + a - 1) / a * a;
        }
    }
}
