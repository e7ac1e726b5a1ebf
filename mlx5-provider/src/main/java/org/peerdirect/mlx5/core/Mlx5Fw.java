package org.peerdirect.mlx5.core;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Odp;
import org.peerdirect.hca.cx4.ifc.Pages;

/**
 * One function's capabilities and the firmware commands around them ({@code fw.c}, with the
 * capability edits of {@code main.c}'s {@code handle_hca_cap} and {@code handle_hca_cap_odp}):
 * {@code QUERY_HCA_CAP} of the general and ODP blocks (maximum and current), {@code SET_HCA_CAP}
 * of what Linux changes, {@code INIT_HCA} and {@code TEARDOWN_HCA}. The current general block is
 * what {@code MLX5_CAP_GEN} reads, the ODP block as set what {@code MLX5_CAP_ODP} reads.
 *
 * <p>Lock rules: written only by the core's load thread (under the core's monitor) before the
 * device is published as up; read by anyone after. A reload rewrites the blocks in place.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/fw.c">fw.c</a>
 */
final class Mlx5Fw {

    private final CmdIf cmd;
    private final byte[] capsCur = new byte[HcaCap.SIZE];
    private final byte[] capsMax = new byte[HcaCap.SIZE];
    /** The ODP capability block as set ({@code MLX5_CAP_ODP}); all zero without {@code pg}. */
    private final byte[] capsOdp = new byte[HcaCap.SIZE];

    Mlx5Fw(CmdIf cmd) {
        this.cmd = cmd;
    }

    /** The start of a load: no ODP block until {@link #handleHcaCapOdp} finds {@code pg}. */
    void reset() {
        Arrays.fill(capsOdp, (byte) 0);
    }

    /** The current general capabilities ({@code MLX5_CAP_GEN}'s block). */
    MemorySegment caps() {
        return MemorySegment.ofArray(capsCur);
    }

    /** A general capability (current value) by its field. */
    int cap(IfcField f) {
        return f.get(caps(), 0);
    }

    /** {@code MLX5_CAP_ODP}: a field of the ODP block (0 on a device without page faults). */
    int odpCap(IfcField f) {
        return f.get(MemorySegment.ofArray(capsOdp), 0);
    }

    /** {@code mlx5_query_hca_caps}: the general block, maximum and current (after {@code INIT_HCA}). */
    void queryHcaCaps() {
        queryCaps(HcaCap.TYPE_GENERAL, HcaCap.MODE_MAX, capsMax);
        queryCaps(HcaCap.TYPE_GENERAL, HcaCap.MODE_CUR, capsCur);
    }

    /** {@code mlx5_core_get_caps_mode}: one block of {@code type} in {@code mode} into {@code into}. */
    private void queryCaps(int type, int mode, byte[] into) {
        MemorySegment out = cmd.exec(CmdIf.input(Mlx5Cmd.QUERY_HCA_CAP, type << 1 | mode, 16), HcaCap.QUERY_OUT_LEN);
        MemorySegment.copy(out, HcaCap.OFFSET, MemorySegment.ofArray(into), 0, HcaCap.SIZE);
    }

    /** {@code handle_hca_cap} ({@code main.c}): the current general caps edited as Linux edits them, then set. */
    void handleHcaCap() {
        queryHcaCaps();
        MemorySegment in = CmdIf.input(Mlx5Cmd.SET_HCA_CAP, HcaCap.TYPE_GENERAL << 1, HcaCap.SET_IN_LEN);
        MemorySegment.copy(MemorySegment.ofArray(capsCur), 0, in, HcaCap.OFFSET, HcaCap.SIZE);
        MemorySegment max = MemorySegment.ofArray(capsMax);
        HcaCap.PKEY_TABLE_SIZE.set(in, HcaCap.OFFSET, 0); // to_fw_pkey_sz(128)
        HcaCap.LOG_MAX_QP.set(in, HcaCap.OFFSET, Math.min(18, HcaCap.LOG_MAX_QP.get(max, 0))); // prof_sel 2's log_max_qp
        HcaCap.CMDIF_CHECKSUM.set(in, HcaCap.OFFSET, 0);
        HcaCap.DRAIN_SIGERR.set(in, HcaCap.OFFSET, HcaCap.DRAIN_SIGERR.get(max, 0));
        HcaCap.LOG_UAR_PAGE_SZ.set(in, HcaCap.OFFSET, 0); // PAGE_SHIFT - 12
        HcaCap.CACHE_LINE_128BYTE.set(in, HcaCap.OFFSET, 0); // 64-byte cache lines
        cmd.exec(in, 16);
    }

    /**
     * {@code handle_hca_cap_odp} ({@code main.c}): with {@code pg}, the ODP block's SRQ-receive
     * bits raised to their maximum ({@code ODP_CAP_SET_MAX}) and set when that changes anything;
     * the block as set is what mlx5_ib reads ({@code MLX5_CAP_ODP}).
     */
    void handleHcaCapOdp() {
        if (HcaCap.PG.get(caps(), 0) == 0) {
            return;
        }
        byte[] max = new byte[HcaCap.SIZE];
        queryCaps(HcaCap.TYPE_ODP, HcaCap.MODE_MAX, max);
        queryCaps(HcaCap.TYPE_ODP, HcaCap.MODE_CUR, capsOdp);
        MemorySegment cur = MemorySegment.ofArray(capsOdp);
        boolean change = false;
        for (IfcField f : new IfcField[] { Odp.RC_ODP_CAPS, Odp.UD_ODP_CAPS, Odp.XRC_ODP_CAPS, Odp.DC_ODP_CAPS }) {
            int want = f.get(cur, 0) | f.get(MemorySegment.ofArray(max), 0) & Odp.CAP_SRQ_RECEIVE;
            change |= want != f.get(cur, 0);
            f.set(cur, 0, want);
        }
        if (change) {
            MemorySegment in = CmdIf.input(Mlx5Cmd.SET_HCA_CAP, HcaCap.TYPE_ODP << 1, HcaCap.SET_IN_LEN);
            MemorySegment.copy(cur, 0, in, HcaCap.OFFSET, HcaCap.SIZE);
            cmd.exec(in, 16);
        }
    }

    /** {@code mlx5_cmd_init_hca}. */
    void initHca() {
        cmd.exec(CmdIf.input(Mlx5Cmd.INIT_HCA, 0, 16), 16);
    }

    /**
     * {@code mlx5_cmd_teardown_hca}: the graceful profile; when the firmware refuses it and
     * reports {@code force_teardown}, {@code mlx5_cmd_force_teardown_hca}'s force close.
     */
    void teardownHca() {
        try {
            teardownHca(Pages.TEARDOWN_GRACEFUL);
        } catch (Mlx5CmdException e) {
            if (e.kind() != Mlx5CmdException.Kind.STATUS || HcaCap.FORCE_TEARDOWN.get(caps(), 0) == 0) {
                throw e;
            }
            teardownHca(Pages.TEARDOWN_FORCE_CLOSE);
        }
    }

    private void teardownHca(int profile) {
        MemorySegment in = CmdIf.input(Mlx5Cmd.TEARDOWN_HCA, 0, 16);
        Pages.TEARDOWN_PROFILE.set(in, 0, profile);
        cmd.exec(in, 16);
    }
}
