package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/** The firmware's dispatch table: one handler per opcode, the lengths each command declares. */
class CommandTableTest {

    private static final CommandTable.Handler NOTHING = (opMod, in, out) -> {
    };

    @Test
    void anOpcodeIsRegisteredOnceAndFoundWithWhatItDeclared() {
        CommandTable t = new CommandTable();
        t.add(Mlx5Cmd.NOP, NOTHING);
        t.add(Mlx5Cmd.QUERY_ISSI, 16, Mlx5Cmd.QUERY_ISSI_OUT_LEN, NOTHING);
        CommandTable.Entry nop = t.get(Mlx5Cmd.NOP);
        assertSame(NOTHING, nop.handler());
        assertEquals(CommandTable.MIN_INPUT, nop.inputLength().applyAsInt(MemorySegment.ofArray(new byte[16])));
        assertEquals(CommandTable.MIN_OUTPUT, nop.outputLength());
        assertFalse(nop.takesOpMod());
        assertEquals(Mlx5Cmd.QUERY_ISSI_OUT_LEN, t.get(Mlx5Cmd.QUERY_ISSI).outputLength());
        assertNull(t.get(Mlx5Cmd.CREATE_CQ), "an opcode no file registered has no entry (the firmware answers BAD_OP)");
        IllegalStateException twice = assertThrows(IllegalStateException.class, () -> t.add(Mlx5Cmd.NOP, NOTHING));
        assertTrue(twice.getMessage().contains("registered twice"), twice.getMessage());
    }

    @Test
    void aListCommandNeedsItsFixedPartThenItsList() {
        // a list of 8-byte entries at 0x20, as many as the input's dword at 0x10 says
        var length = CommandTable.withList(0x20, in -> in.get(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 0x10));
        assertEquals(0x20, length.applyAsInt(MemorySegment.ofArray(new byte[0x18])), "a short input needs the fixed part first");
        MemorySegment in = MemorySegment.ofArray(new byte[0x20]);
        in.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 0x10, 3);
        assertEquals(0x20 + 3 * 8, length.applyAsInt(in));
        in.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 0x10, Integer.MAX_VALUE);
        assertEquals(Integer.MAX_VALUE, length.applyAsInt(in), "a list too long for any input saturates, it does not wrap");
    }
}
