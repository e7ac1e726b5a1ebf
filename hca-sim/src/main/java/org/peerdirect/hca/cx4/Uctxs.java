package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.util.BitSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.IntUnaryOperator;

import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/**
 * DevX user contexts ({@code CREATE_UCTX}, {@code DESTROY_UCTX}; the driver side is
 * {@code mlx5_ib_devx_create}/{@code _destroy} in {@code devx.c}) and the uid every command carries
 * in its header: a command with uid {@code u ≠ 0} needs a live user context {@code u}, and the
 * objects it creates (UARs, PDs, XRC domains, CQs, QPs, SRQs, mkeys, umems; general objects keep
 * their own owners, {@link GeneralObjects}) remember {@code u}. A command of another non-zero uid
 * may neither use one in an object it creates ({@link #checkUse}) nor modify, query or destroy it
 * ({@link #check}). The kernel's objects (uid 0) may be used by every uid (a user QP on the
 * kernel's CQ; an mkey of the kernel's mkey cache) but changed by the kernel alone; the kernel's
 * commands (uid 0) reach every object (its cleanup).
 * {@code DESTROY_UCTX} is refused while the uid owns anything.
 *
 * <p>Lock rules: the firmware thread alone.
 */
final class Uctxs {

    /** What an owned number names (a UAR page, a PD, ...): the key's high half. */
    enum Kind {
        UAR, PD, XRCD, CQ, QP, SRQ, MKEY, UMEM
    }

    /** Function-level commands: a uid in their header is refused (the driver never forwards them from a user). */
    private static final Set<Integer> KERNEL_ONLY = Set.of(Mlx5Cmd.ENABLE_HCA, Mlx5Cmd.DISABLE_HCA, Mlx5Cmd.SET_ISSI, Mlx5Cmd.QUERY_PAGES,
            Mlx5Cmd.MANAGE_PAGES, Mlx5Cmd.INIT_HCA, Mlx5Cmd.TEARDOWN_HCA, Mlx5Cmd.SET_HCA_CAP, Mlx5Cmd.CREATE_EQ, Mlx5Cmd.DESTROY_EQ,
            Mlx5Cmd.GEN_EQE, Mlx5Cmd.CREATE_UCTX, Mlx5Cmd.DESTROY_UCTX, Mlx5Cmd.PAGE_FAULT_RESUME, Mlx5Cmd.SET_DRIVER_VERSION);

    private final Caps caps;
    private final BitSet uids = new BitSet();
    /** (kind, number) → owner uid, for objects of a non-zero uid only. */
    private final Map<Long, Integer> owners = new HashMap<>();
    /** The uid of the command executing (0 between commands). */
    private int current;

    Uctxs(Caps caps) {
        this.caps = caps;
    }

    /** The commands, on a device that reports DevX; {@code generalObjects} counts a uid's general objects. */
    void register(CommandTable t, IntUnaryOperator generalObjects) {
        if (!caps.devx()) {
            return;
        }
        t.add(Mlx5Cmd.CREATE_UCTX, Devx.CREATE_UCTX_IN_LEN, CommandTable.MIN_OUTPUT, (opMod, in, out) -> Devx.CREATE_UCTX_OUT_UID.set(out, 0, create()));
        t.add(Mlx5Cmd.DESTROY_UCTX, (opMod, in, out) -> destroy(Devx.DESTROY_UCTX_IN_UID.get(in, 0), generalObjects));
    }

    /**
     * Before a command runs: its header's uid, checked (a live user context, on a command that
     * takes one); it is {@link #current} until {@link #end}.
     */
    void begin(int opcode, MemorySegment in) throws Refused {
        int uid = Devx.UID.get(in, 0);
        if (uid != 0) {
            if (KERNEL_ONLY.contains(opcode)) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UID, Mlx5Cmd.name(opcode) + " takes no uid (uid " + uid + " given)");
            }
            if (!uids.get(uid)) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UID, "uid " + uid + " names no user context (CREATE_UCTX)");
            }
        }
        current = uid;
    }

    void end() {
        current = 0;
    }

    /** The uid of the command executing. */
    int current() {
        return current;
    }

    boolean exists(int uid) {
        return uid == 0 || uids.get(uid);
    }

    private static long key(Kind k, int n) {
        return (long) k.ordinal() << 32 | n & 0xffff_ffffL;
    }

    /** The object {@code n} of {@code k} was just created: it belongs to the current uid. */
    void own(Kind k, int n) {
        if (current != 0) {
            owners.put(key(k, n), current);
        }
    }

    /** The uid owning {@code n} of {@code k} (0: the kernel's). */
    int owner(Kind k, int n) {
        return owners.getOrDefault(key(k, n), 0);
    }

    /** To use {@code n} of {@code k} in a new object: refused when it belongs to another non-zero uid than the command's. */
    void checkUse(Kind k, int n, String what) throws Refused {
        int owner = owner(k, n);
        if (current != 0 && owner != 0 && owner != current) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID,
                    what + " belongs to uid " + owner + ", not to uid " + current + " of the command");
        }
    }

    /** To modify, query or destroy {@code n} of {@code k}: refused when the command's uid is not 0 and not its owner. */
    void check(Kind k, int n, String what) throws Refused {
        int owner = owner(k, n);
        if (current != 0 && owner != current) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID,
                    what + " belongs to uid " + owner + ", not to uid " + current + " of the command");
        }
    }

    /** The object went. */
    void release(Kind k, int n) {
        owners.remove(key(k, n));
    }

    /** Objects {@code uid} owns (general objects not counted). */
    int owned(int uid) {
        int n = 0;
        for (int o : owners.values()) {
            if (o == uid) {
                n++;
            }
        }
        return n;
    }

    /** User contexts live (a graceful teardown waits for none). */
    int live() {
        return uids.cardinality();
    }

    /** Teardown: every user context and owner forgotten. */
    void clear() {
        uids.clear();
        owners.clear();
        current = 0;
    }

    private int create() throws Refused {
        int uid = uids.nextClearBit(1);
        if (uid >= Math.min(1 << caps.cur(HcaCap.LOG_MAX_UCTX), 1 << 16)) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, Syndromes.SYND_LIMIT, "all " + ((1 << caps.cur(HcaCap.LOG_MAX_UCTX)) - 1) + " user contexts are in use");
        }
        uids.set(uid);
        return uid;
    }

    private void destroy(int uid, IntUnaryOperator generalObjects) throws Refused {
        if (uid == 0 || !uids.get(uid)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "uid " + uid + " names no user context");
        }
        int objects = owned(uid);
        int general = generalObjects.applyAsInt(uid);
        if (objects + general > 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE, String.format(
                    "uid %d still owns %d objects and %d general objects: destroy them first", uid, objects, general));
        }
        uids.clear(uid);
    }
}
