package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;
import java.util.function.ToIntFunction;

/**
 * The firmware's dispatch: opcode to handler, with the input the command needs, the output it
 * writes and whether it takes an {@code op_mod}. Each object's file registers its commands
 * ({@code register(CommandTable)}), as {@code mlx5_core} keeps one file per object; an opcode no
 * file registered is {@code BAD_OP}. Filled while the firmware is built, read-only after
 * (the firmware thread alone reads it).
 */
final class CommandTable {

    /** Executes a command whose lengths, state and {@code op_mod} were checked. */
    @FunctionalInterface
    interface Handler {
        void run(int opMod, MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred;
    }

    /**
     * A command's entry. {@code inputLength} is the fixed part and its lists, computed from the input
     * (which may be shorter than the fixed part: the function must not read past it).
     */
    record Entry(int opcode, ToIntFunction<MemorySegment> inputLength, int outputLength, boolean takesOpMod, Handler handler) {
    }

    /** The output every command has: status, syndrome, and 8 bytes of its own. */
    static final int MIN_OUTPUT = 16;
    /** The input every command has: opcode, op_mod and 8 bytes of its own. */
    static final int MIN_INPUT = 16;

    private final Map<Integer, Entry> entries = new HashMap<>();

    /** A command of 16 input and 16 output bytes, no {@code op_mod}. */
    void add(int opcode, Handler h) {
        add(opcode, in -> MIN_INPUT, MIN_OUTPUT, false, h);
    }

    void add(int opcode, int inputLength, int outputLength, Handler h) {
        add(opcode, in -> inputLength, outputLength, false, h);
    }

    void add(int opcode, ToIntFunction<MemorySegment> inputLength, int outputLength, boolean takesOpMod, Handler h) {
        if (entries.putIfAbsent(opcode, new Entry(opcode, inputLength, outputLength, takesOpMod, h)) != null) {
            throw new IllegalStateException(String.format("opcode 0x%x registered twice", opcode));
        }
    }

    /** The entry of {@code opcode}, or null when no file registered it. */
    Entry get(int opcode) {
        return entries.get(opcode);
    }

    /** The input of a command with a list of {@code 8 × n(in)} bytes at {@code listAt}: the fixed part until it is all there. */
    static ToIntFunction<MemorySegment> withList(long listAt, ToIntFunction<MemorySegment> n) {
        return in -> in.byteSize() < listAt ? (int) listAt : (int) Math.min(Integer.MAX_VALUE, listAt + 8L * n.applyAsInt(in));
    }
}
