package org.peerdirect.flexio.impl;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The symbol table of a DPA image ("peerdirect image format v1", hca-sim's {@code Image}), read as
 * libflexio reads an ELF's symbols: a DPA_THREAD names its entry by the symbol's index.
 */
public final class ImageSymbols {

    private final List<String> names;

    private ImageSymbols(List<String> names) {
        this.names = names;
    }

    /** @throws IllegalArgumentException when the bytes are no image */
    public static ImageSymbols of(byte[] image) {
        ByteBuffer b = ByteBuffer.wrap(image).order(ByteOrder.LITTLE_ENDIAN);
        try {
            byte[] magic = new byte[8];
            b.get(magic);
            if (magic[0] != 'D' || magic[1] != 'P' || magic[2] != 'A' || magic[7] != 1) {
                throw new IllegalArgumentException("not a peerdirect DPA image v1 (bad magic)");
            }
            int classes = b.getInt();
            for (int i = 0; i < classes; i++) {
                skipString(b);
                int len = b.getInt();
                b.position(b.position() + len);
            }
            int n = b.getInt();
            List<String> names = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                names.add(string(b));
                b.get();
                b.getInt();
                skipString(b);
                skipString(b);
            }
            return new ImageSymbols(List.copyOf(names));
        } catch (BufferUnderflowException | IllegalArgumentException e) {
            throw new IllegalArgumentException("malformed DPA image: " + e.getMessage(), e);
        }
    }

    private static void skipString(ByteBuffer b) {
        int len = Short.toUnsignedInt(b.getShort());
        b.position(b.position() + len);
    }

    private static String string(ByteBuffer b) {
        byte[] s = new byte[Short.toUnsignedInt(b.getShort())];
        b.get(s);
        return new String(s, StandardCharsets.UTF_8);
    }

    /** The index of {@code symbol}, or -1. */
    public int indexOf(String symbol) {
        return names.indexOf(symbol);
    }

    public List<String> names() {
        return names;
    }
}
