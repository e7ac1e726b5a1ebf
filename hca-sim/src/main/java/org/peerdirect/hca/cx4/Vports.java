package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Vport;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HcaPort;

/**
 * The port as its vport context shows it ({@code QUERY_HCA_VPORT_CONTEXT},
 * {@code QUERY_HCA_VPORT_GID}; the driver side is {@code mlx5_core}'s {@code vport.c}): state,
 * GUIDs, LID and SM LID on InfiniBand, the GID table of 8 entries: on InfiniBand one GID
 * (link-local from the port GUID); on RoCE v2 the port's IPv4 address IPv4-mapped (index 0, the
 * one the engine's packets leave from) and its IPv6 link-local address (index 1). The model has
 * one port.
 *
 * <p>Lock rules: the firmware thread; the engine's port state is its own.
 */
final class Vports {

    /** Entries of the GID table: {@code gid_table_size} 0 in the capabilities, 8 entries ({@code mlx5_get_gid_table_len}). */
    static final int GID_TABLE_LEN = 8;

    private final HcaDevice engine;
    private final boolean ethernet;

    Vports(HcaDevice engine, boolean ethernet) {
        this.engine = engine;
        this.ethernet = ethernet;
    }

    void register(CommandTable t) {
        engine.setPortGid((p, to, off) -> portGid(p, to, off)); // the GRH the engine writes names the port as this table does
        t.add(Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT, CommandTable.MIN_INPUT, Vport.CONTEXT_OUT_LEN, (opMod, in, out) -> context(in, out));
        t.add(Mlx5Cmd.QUERY_HCA_VPORT_GID, CommandTable.MIN_INPUT, Vport.GID_OUT_LEN, (opMod, in, out) -> gid(in, out));
    }

    private static int port(MemorySegment in) throws Refused {
        int p = Vport.IN_PORT_NUM.get(in, 0);
        if (p != 1) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_FUNCTION, "port " + p + " does not exist (the model has port 1)");
        }
        return p;
    }

    private void context(MemorySegment in, MemorySegment out) throws Refused {
        HcaPort p = engine.port(port(in));
        long c = Vport.OUT_CONTEXT;
        Vport.PORT_STATE.set(out, c, p.active() ? Vport.PORT_ACTIVE : Vport.PORT_DOWN);
        Vport.VPORT_STATE.set(out, c, p.active() ? Vport.PORT_ACTIVE : Vport.PORT_DOWN);
        Vport.PORT_PHYSICAL_STATE.set(out, c, p.active() ? Vport.PHYS_LINK_UP : Vport.PHYS_DISABLED);
        out.set(BE64, c + Vport.NODE_GUID, nodeGuid());
        out.set(BE64, c + Vport.PORT_GUID, nodeGuid() + 1);
        if (!ethernet) { // an Ethernet port has no LID and no SM
            Vport.LID.set(out, c, p.lid());
            Vport.SM_LID.set(out, c, 1);
        }
    }

    private void gid(MemorySegment in, MemorySegment out) throws Refused {
        HcaPort p = engine.port(port(in));
        int index = Vport.IN_GID_INDEX.get(in, 0);
        if (index >= GID_TABLE_LEN) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_LIMIT, "GID index " + index + ": the table has " + GID_TABLE_LEN + " entries");
        }
        if (index == 0) {
            portGid(p, out, Vport.OUT_GID);
        } else if (index == 1 && ethernet) {
            linkLocalGid(p, out, Vport.OUT_GID);
        }
        // an unused entry reads as the zero GID, as firmware's
    }

    /**
     * An Ethernet port's second GID: the IPv6 link-local address from its MAC (EUI-64, the
     * universal/local bit flipped), as rxe's GID 0 and any RoCE port with an IPv6 link-local
     * address have; on the in-JVM fabric, from the port GUID.
     */
    private void linkLocalGid(HcaPort p, MemorySegment out, long off) {
        org.peerdirect.hca.engine.WirePort w = p.wire();
        if (w != null) {
            MemorySegment.copy(w.gid(0), 0, out, ValueLayout.JAVA_BYTE, off, 16);
        } else {
            out.set(BE64, off, 0xfe80_0000_0000_0000L);
            out.set(BE64, off + 8, (nodeGuid() + 1) ^ 0x0200_0000_0000_0000L);
        }
    }

    /** GID 0 of port {@code p} into 16 bytes at {@code off}. */
    private void portGid(HcaPort p, MemorySegment out, long off) {
        org.peerdirect.hca.engine.WirePort w = p.wire();
        if (w != null) { // on a wire: the configured IPv4 address, IPv4-mapped (rxe's RoCE v2 GID)
            MemorySegment.copy(w.gid(1), 0, out, ValueLayout.JAVA_BYTE, off, 16);
        } else if (ethernet) { // RoCE v2: the port's IPv4 address, IPv4-mapped
            MemorySegment.copy(Roce.gidOf(p.lid()), 0, out, ValueLayout.JAVA_BYTE, off, 16);
        } else { // the link-local prefix and the port GUID
            out.set(BE64, off, 0xfe80_0000_0000_0000L);
            out.set(BE64, off + 8, nodeGuid() + 1);
        }
    }

    /** The node GUID: Mellanox's OUI with the port's fabric endpoint. */
    long nodeGuid() {
        return 0x0002_c903_0000_0000L | (ethernet ? 0x10_0000L : 0) | engine.port(1).lid();
    }
}
