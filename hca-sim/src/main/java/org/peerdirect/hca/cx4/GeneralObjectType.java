package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;

/**
 * One type of general object ({@code CREATE/MODIFY/QUERY/DESTROY_GENERAL_OBJECT}, opcodes
 * {@code 0xa00..0xa03}; the header is {@code general_obj_in_cmd_hdr}: {@code opcode[16] uid[16] |
 * rsvd[16] obj_type[16] | obj_id[32] | alias[1]}). The dispatcher ({@code GeneralObjects}) decodes
 * the header, checks that the uid exists (0 is the kernel's) and, for modify, query and destroy,
 * that {@code objId} exists, is of this type and belongs to that uid, then calls the type. A type
 * checks its own fields and every object they name (another uid's object is refused, as
 * {@code devx.c} and the firmware do).
 *
 * <p>Every method runs on the firmware thread (the command queue's executor); an implementation
 * that shares state with the data path guards it itself.
 */
interface GeneralObjectType {

    /** The {@code obj_type} this handles (for example {@code DPA_PROCESS 0x2a}). */
    int objType();

    /**
     * Creates an object for {@code uid} from {@code obj}, the object's context after the 16-byte
     * header, and writes its outputs after the 16-byte output header of {@code out}; returns the
     * new {@code obj_id} (the dispatcher writes it into the output header). A type short of
     * firmware pages for the object's context throws {@link CommandQueue.Deferred} before it
     * changes anything (the command runs again once the driver gave pages).
     */
    int create(int uid, MemorySegment obj, MemorySegment out) throws Refused, CommandQueue.Deferred;

    /** Modifies the fields {@code obj} selects ({@code modify_field_select} is the type's). */
    void modify(int uid, int objId, MemorySegment obj) throws Refused;

    /** Writes the object's context after the 16-byte output header of {@code out}. */
    void query(int uid, int objId, MemorySegment out) throws Refused;

    /** Destroys the object; refused while another object still refers to it. */
    void destroy(int uid, int objId) throws Refused;
}
