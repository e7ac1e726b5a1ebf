package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/**
 * The general-object dispatcher ({@code CREATE/MODIFY/QUERY/DESTROY_GENERAL_OBJECT}, opcodes
 * {@code 0xa00..0xa03}; the driver side is {@code devx.c}'s {@code devx_obj_create} and friends):
 * decodes {@code general_obj_in_cmd_hdr} ({@code obj_type} where other commands have
 * {@code op_mod}, {@code obj_id}), finds the {@link GeneralObjectType} registered for the type
 * ({@code BAD_PARAM} and {@link Syndromes#SYND_BAD_OBJ_TYPE} otherwise), and, for modify, query and
 * destroy, that the object exists with that type ({@code BAD_RES}) and belongs to the command's uid
 * ({@link Syndromes#SYND_WRONG_UID}; uid 0, the kernel's, reaches every object); the header's uid
 * itself was checked before ({@link Uctxs#begin}). The type checks its own fields.
 *
 * <p>Lock rules: the firmware thread alone, but {@link #add} (a concurrent map of types).
 */
final class GeneralObjects {

    private final Caps caps;
    private final Uctxs uctxs;
    private final Eqs eqs;
    /** Types by {@code obj_type}: added by the device's builders, read by the firmware thread. */
    private final Map<Integer, GeneralObjectType> types = new java.util.concurrent.ConcurrentHashMap<>();
    /** (obj_type, obj_id) → owner uid of every live object; written by the firmware thread, read by {@link #objectChanged}'s. */
    private final Map<Long, Integer> owners = new java.util.concurrent.ConcurrentHashMap<>();

    GeneralObjects(Caps caps, Uctxs uctxs, Eqs eqs) {
        this.caps = caps;
        this.uctxs = uctxs;
        this.eqs = eqs;
    }

    /**
     * A live object changed (the model's DPA process error, the types' own reasons): an
     * {@code OBJECT_CHANGE} EQE ({@code mlx5_eqe_obj_change}: {@code obj_type}, {@code obj_id})
     * on the EQ that asked for the type, which DevX hands to the channels subscribed to the object.
     * Any thread (the EQs guard themselves); false when the object does not exist or no EQ took it.
     */
    boolean objectChanged(int objType, int objId) {
        if (!owners.containsKey(key(objType, objId))) {
            return false;
        }
        MemorySegment d = MemorySegment.ofArray(new byte[28]);
        d.set(org.peerdirect.hca.cx4.ifc.CmdEntry.BE16, org.peerdirect.hca.cx4.ifc.Eq.OBJ_CHANGE_TYPE, (short) objType);
        d.set(org.peerdirect.hca.cx4.ifc.CmdEntry.BE32, org.peerdirect.hca.cx4.ifc.Eq.OBJ_CHANGE_ID, objId);
        return eqs.postEvent(org.peerdirect.hca.cx4.ifc.Eq.EVENT_OBJECT_CHANGE, 0, d);
    }

    /** Adds a type (any thread; before the driver may use it); one per {@code obj_type}. */
    void add(GeneralObjectType t) {
        if (types.putIfAbsent(t.objType(), t) != null) {
            throw new IllegalStateException(String.format("general object type 0x%x registered twice", t.objType()));
        }
    }

    void register(CommandTable t) {
        if (!caps.devx()) {
            return;
        }
        // the object's context follows the header: each type checks the length it needs
        t.add(Mlx5Cmd.CREATE_GENERAL_OBJECT, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (objType, in, out) -> create(objType, in, out));
        t.add(Mlx5Cmd.MODIFY_GENERAL_OBJECT, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true,
                (objType, in, out) -> live(objType, in, "MODIFY").modify(uctxs.current(), objId(in), body(in)));
        t.add(Mlx5Cmd.QUERY_GENERAL_OBJECT, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true,
                (objType, in, out) -> live(objType, in, "QUERY").query(uctxs.current(), objId(in), out));
        t.add(Mlx5Cmd.DESTROY_GENERAL_OBJECT, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (objType, in, out) -> destroy(objType, in));
    }

    private static long key(int objType, int objId) {
        return (long) objType << 32 | objId & 0xffff_ffffL;
    }

    private static int objId(MemorySegment in) {
        return in.get(org.peerdirect.hca.cx4.ifc.CmdEntry.BE32, Devx.OBJ_ID);
    }

    private static MemorySegment body(MemorySegment in) {
        return in.asSlice(Devx.GENERAL_OBJ_HDR);
    }

    private GeneralObjectType type(int objType) throws Refused {
        GeneralObjectType t = types.get(objType);
        if (t == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OBJ_TYPE, String.format(
                    "obj_type 0x%x: this device creates no such general object (it creates %s)", objType,
                    types.keySet().stream().sorted().map(k -> String.format("0x%x", k)).toList()));
        }
        return t;
    }

    /** The type of a live object the header names, owned by the command's uid (or the command is the kernel's). */
    private GeneralObjectType live(int objType, MemorySegment in, String what) throws Refused {
        GeneralObjectType t = type(objType);
        int id = objId(in);
        Integer owner = owners.get(key(objType, id));
        if (owner == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT,
                    String.format("%s_GENERAL_OBJECT: no object 0x%x of type 0x%x", what, id, objType));
        }
        int uid = uctxs.current();
        if (uid != 0 && owner != uid) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID,
                    String.format("%s_GENERAL_OBJECT: object 0x%x of type 0x%x belongs to uid %d, not to uid %d", what, id, objType, owner, uid));
        }
        return t;
    }

    private void create(int objType, MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        GeneralObjectType t = type(objType);
        int uid = uctxs.current();
        int id = t.create(uid, body(in), out);
        if (owners.putIfAbsent(key(objType, id), uid) != null) {
            throw new IllegalStateException(String.format("type 0x%x handed out object 0x%x twice", objType, id));
        }
        out.set(org.peerdirect.hca.cx4.ifc.CmdEntry.BE32, Devx.OBJ_ID, id);
    }

    private void destroy(int objType, MemorySegment in) throws Refused {
        GeneralObjectType t = live(objType, in, "DESTROY");
        int id = objId(in);
        t.destroy(uctxs.current(), id);
        owners.remove(key(objType, id));
    }

    /** The owner uid of object {@code objId} of {@code objType}, null when it does not exist (any thread). */
    Integer owner(int objType, int objId) {
        return owners.get(key(objType, objId));
    }

    /** The ids of the live objects of {@code objType}, ascending (tools; any thread). */
    java.util.List<Integer> ids(int objType) {
        return owners.keySet().stream().filter(k -> (int) (k >>> 32) == objType).map(k -> (int) (long) k).sorted().toList();
    }

    /** The general objects {@code uid} owns. */
    int owned(int uid) {
        int n = 0;
        for (int o : owners.values()) {
            if (o == uid) {
                n++;
            }
        }
        return n;
    }

    /** Live general objects (a graceful teardown waits for none). */
    int count() {
        return owners.size();
    }

    /** Teardown: every object forgotten (the types drop their own state). */
    void clear() {
        owners.clear();
    }
}
