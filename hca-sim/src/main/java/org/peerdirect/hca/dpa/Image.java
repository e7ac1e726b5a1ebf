package org.peerdirect.hca.dpa;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A DPA image as bytes in DPA memory ("peerdirect image format v1", the model's stand-in for
 * DPACC's ELF): the program's class files and its symbol table. Little-endian:
 *
 * <pre>
 * magic   8  "DPAIMG" 0x00 0x01
 * classes u32, each: name (u16 length + UTF-8 binary name) | u32 length | class file bytes
 * symbols u32, each: name | u8 kind (1 global, 2 rpc) | u32 argbuf size | class name | method name
 * </pre>
 *
 * An entry point is a static method of an image class: {@code void m(long threadArg)} for a
 * {@code __dpa_global__} handler, {@code long m(long argbufDaddr)} for a {@code __dpa_rpc__}.
 */
record Image(Map<String, byte[]> classes, Map<String, Symbol> symbols) {

    static final byte[] MAGIC = {'D', 'P', 'A', 'I', 'M', 'G', 0, 1};
    static final int GLOBAL = 1;
    static final int RPC = 2;
    static final int MAX_ENTRIES = 1 << 16;

    /** One symbol table entry. */
    record Symbol(String name, int kind, int argbufSize, String className, String method) {
        boolean rpc() {
            return kind == RPC;
        }
    }

    /** Parses {@code bytes}; refuses anything malformed (rule {@code malformed-image}), never half-reads. */
    static Image parse(MemorySegment bytes) throws ImageRejected {
        ByteBuffer b = bytes.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        try {
            byte[] magic = new byte[8];
            b.get(magic);
            if (!java.util.Arrays.equals(magic, MAGIC)) {
                throw new ImageRejected("malformed-image", "header", "bad magic (not a peerdirect DPA image v1)");
            }
            Map<String, byte[]> classes = new LinkedHashMap<>();
            int n = count(b, "classes");
            for (int i = 0; i < n; i++) {
                String name = string(b);
                int len = b.getInt();
                if (len <= 0 || len > b.remaining()) {
                    throw new ImageRejected("malformed-image", "class " + name, "length " + len + " beyond the image");
                }
                byte[] cls = new byte[len];
                b.get(cls);
                if (classes.put(name, cls) != null) {
                    throw new ImageRejected("malformed-image", "class " + name, "defined twice");
                }
            }
            Map<String, Symbol> symbols = new LinkedHashMap<>();
            int s = count(b, "symbols");
            for (int i = 0; i < s; i++) {
                Symbol sym = new Symbol(string(b), b.get(), b.getInt(), string(b), string(b));
                if ((sym.kind() != GLOBAL && sym.kind() != RPC) || sym.argbufSize() < 0) {
                    throw new ImageRejected("malformed-image", "symbol " + sym.name(), "kind " + sym.kind()
                            + " argbuf " + sym.argbufSize());
                }
                if (!classes.containsKey(sym.className())) {
                    throw new ImageRejected("malformed-image", "symbol " + sym.name(), "class " + sym.className()
                            + " is not in the image");
                }
                symbols.put(sym.name(), sym);
            }
            return new Image(Collections.unmodifiableMap(classes), Collections.unmodifiableMap(symbols));
        } catch (java.nio.BufferUnderflowException e) {
            throw new ImageRejected("malformed-image", "image", "truncated");
        }
    }

    private static int count(ByteBuffer b, String what) throws ImageRejected {
        int n = b.getInt();
        if (n < 0 || n > MAX_ENTRIES) {
            throw new ImageRejected("malformed-image", "image", what + " count " + n);
        }
        return n;
    }

    private static String string(ByteBuffer b) throws ImageRejected {
        int len = Short.toUnsignedInt(b.getShort());
        if (len == 0 || len > b.remaining()) {
            throw new ImageRejected("malformed-image", "image", "name length " + len);
        }
        byte[] s = new byte[len];
        b.get(s);
        return new String(s, StandardCharsets.UTF_8);
    }
}
