package org.peerdirect.hca.cx4.ifc;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;

/**
 * One field of an {@code mlx5_ifc.h} layout, named as the kernel's {@code MLX5_GET}/{@code MLX5_SET}
 * name it: a bit offset counted from the most significant bit of the structure's first byte and a
 * width of at most 32 bits, inside one big-endian dword. Reads and writes go through the dword, as
 * the kernel's macros do, so neighbouring fields are kept.
 *
 * @param bitOffset MSB-first bit offset from the structure's start ({@code __mlx5_bit_off})
 * @param width bits (1..32), the field may not cross a dword
 */
public record IfcField(int bitOffset, int width) {

    public IfcField {
        if (width < 1 || width > 32 || bitOffset / 32 != (bitOffset + width - 1) / 32) {
            throw new IllegalArgumentException("field at bit 0x" + Integer.toHexString(bitOffset) + " width " + width + " crosses a dword");
        }
    }

    /** Byte offset of the field's dword. */
    public long dwordOffset() {
        return bitOffset / 32 * 4L;
    }

    private int shift() {
        return 32 - bitOffset % 32 - width;
    }

    private int mask() {
        return width == 32 ? -1 : (1 << width) - 1;
    }

    /** {@code MLX5_GET(struct, base + structOffset, field)}: the value, unsigned in the low bits. */
    public int get(MemorySegment s, long structOffset) {
        return s.get(BE32, structOffset + dwordOffset()) >>> shift() & mask();
    }

    /** {@code MLX5_SET}: the value's low {@code width} bits, the rest of the dword kept. */
    public void set(MemorySegment s, long structOffset, int value) {
        long at = structOffset + dwordOffset();
        int m = mask() << shift();
        s.set(BE32, at, s.get(BE32, at) & ~m | value << shift() & m);
    }
}
