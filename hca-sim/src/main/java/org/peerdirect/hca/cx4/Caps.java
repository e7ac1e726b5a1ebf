package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.DpaCap;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Odp;

/**
 * The capabilities the firmware reports and the driver may set ({@code QUERY_HCA_CAP},
 * {@code SET_HCA_CAP}; the driver side is {@code mlx5_core}'s {@code fw.c} and
 * {@code handle_hca_cap}): the general block (type 0) and the ODP block (type 2), each as its
 * maximum and its current values; on the BlueField-3 also DevX ({@code log_max_uctx},
 * {@code log_max_umem}, the DPA's {@code general_obj_types}) and the read-only DPA block
 * ({@link DpaCap}, peerdirect PRM extension v1).
 *
 * <p>Lock rules: the firmware thread alone, no locking.
 */
final class Caps {

    private final byte[] maxGeneral = new byte[HcaCap.SIZE];
    private final byte[] curGeneral = new byte[HcaCap.SIZE];
    /** The ODP capability block (type 2): what the model can fault on, and what the driver enabled. */
    private final byte[] maxOdp = new byte[HcaCap.SIZE];
    private final byte[] curOdp = new byte[HcaCap.SIZE];
    /** The DPA block (read-only: maximum and current alike), or null on a device without a DPA. */
    private final byte[] dpa;

    /** Fields a driver may change with {@code SET_HCA_CAP}, each at most its maximum; the rest is read-only. */
    private static final IfcField[] EDITABLE = { HcaCap.PKEY_TABLE_SIZE, HcaCap.LOG_MAX_QP, HcaCap.CMDIF_CHECKSUM, HcaCap.DRAIN_SIGERR,
            HcaCap.LOG_UAR_PAGE_SZ, HcaCap.CACHE_LINE_128BYTE, HcaCap.UAR_4K, HcaCap.DCT };

    private static final IfcField[] ODP_TRANSPORTS = { Odp.RC_ODP_CAPS, Odp.UC_ODP_CAPS, Odp.UD_ODP_CAPS, Odp.XRC_ODP_CAPS, Odp.DC_ODP_CAPS };

    Caps(boolean ethernet, int uarPages) {
        this(ethernet, false, uarPages);
    }

    /** {@code bluefield3}: DevX and the DPA are reported. */
    Caps(boolean ethernet, boolean bluefield3, int uarPages) {
        MemorySegment m = MemorySegment.ofArray(maxGeneral);
        // a real ConnectX-4 reports 15; the shared engine's receive queues hold at most 16351 WQEs
        HcaCap.LOG_MAX_SRQ_SZ.set(m, 0, 13);
        HcaCap.LOG_MAX_QP_SZ.set(m, 0, 15);
        HcaCap.LOG_MAX_QP.set(m, 0, 18);
        HcaCap.LOG_MAX_SRQ.set(m, 0, 16); // the engine's SRQ table (a real ConnectX-4: 23)
        HcaCap.LOG_MAX_CQ_SZ.set(m, 0, 22);
        HcaCap.LOG_MAX_CQ.set(m, 0, 24);
        HcaCap.LOG_MAX_EQ_SZ.set(m, 0, 22);
        HcaCap.LOG_MAX_MKEY.set(m, 0, 24);
        HcaCap.LOG_MAX_EQ.set(m, 0, 5);
        HcaCap.FORCE_TEARDOWN.set(m, 0, 1);
        HcaCap.LOG_MAX_KLM_LIST_SIZE.set(m, 0, 16);
        HcaCap.LOG_MAX_RA_REQ_QP.set(m, 0, 4);
        HcaCap.LOG_MAX_RA_RES_QP.set(m, 0, 4);
        HcaCap.CACHE_LINE_128BYTE.set(m, 0, 1);
        HcaCap.PKEY_TABLE_SIZE.set(m, 0, 0); // 128 entries
        HcaCap.LOCAL_CA_ACK_DELAY.set(m, 0, 16);
        HcaCap.PORT_TYPE.set(m, 0, ethernet ? HcaCap.PORT_TYPE_ETH : HcaCap.PORT_TYPE_IB);
        HcaCap.NUM_PORTS.set(m, 0, 1);
        HcaCap.LOG_MAX_MSG.set(m, 0, 30);
        HcaCap.CQE_VERSION.set(m, 0, 1);
        HcaCap.DRAIN_SIGERR.set(m, 0, 1);
        HcaCap.ROCE.set(m, 0, ethernet ? 1 : 0);
        HcaCap.ATOMIC.set(m, 0, 1);
        HcaCap.XRC.set(m, 0, 1);
        HcaCap.UD.set(m, 0, 1);
        HcaCap.RC.set(m, 0, 1);
        HcaCap.UAR_4K.set(m, 0, 1);
        HcaCap.UAR_SZ.set(m, 0, Integer.numberOfTrailingZeros(uarPages));
        HcaCap.LOG_PG_SZ.set(m, 0, 12);
        HcaCap.BF.set(m, 0, 1);
        HcaCap.DRIVER_VERSION.set(m, 0, 1);
        HcaCap.LOG_BF_REG_SIZE.set(m, 0, 9);
        HcaCap.MAX_WQE_SZ_SQ.set(m, 0, 1024);
        HcaCap.MAX_WQE_SZ_RQ.set(m, 0, 512);
        HcaCap.LOG_MAX_PD.set(m, 0, 24);
        HcaCap.LOG_MAX_XRCD.set(m, 0, 24);
        HcaCap.NUM_OF_UARS_PER_PAGE.set(m, 0, 1);
        HcaCap.PG.set(m, 0, 1);
        HcaCap.UMR_EXTENDED_TRANSLATION_OFFSET.set(m, 0, 1);
        // KSM mkeys of fixed-size entries and the null mkey: what implicit ODP's parent needs
        HcaCap.FIXED_BUFFER_SIZE.set(m, 0, 1);
        HcaCap.NULL_MKEY.set(m, 0, 1);
        HcaCap.ATOMIC_WRITE.set(m, 0, 1);
        HcaCap.FLUSH_GLOBAL.set(m, 0, 1);
        HcaCap.FLUSH_PERSISTENT.set(m, 0, 1);
        dpa = bluefield3 ? devxAndDpa(m) : null;
        System.arraycopy(maxGeneral, 0, curGeneral, 0, HcaCap.SIZE);
        // the engine faults on every RC and XRC operation and on UD sends and SRQ receives; it carries no UC
        // or DC QPs, so their caps stay clear. SRQ receives are off until the driver enables them
        // (handle_hca_cap_odp sets the srq_receive caps to their maximum)
        MemorySegment o = MemorySegment.ofArray(maxOdp);
        Odp.RC_ODP_CAPS.set(o, 0, Odp.CAP_SEND | Odp.CAP_RECEIVE | Odp.CAP_WRITE | Odp.CAP_READ | Odp.CAP_ATOMIC | Odp.CAP_SRQ_RECEIVE);
        Odp.UD_ODP_CAPS.set(o, 0, Odp.CAP_SEND | Odp.CAP_SRQ_RECEIVE);
        // XRC: the RC operations, receiving only into XRC SRQs (an XRC QP has no receive queue)
        Odp.XRC_ODP_CAPS.set(o, 0, Odp.CAP_SEND | Odp.CAP_WRITE | Odp.CAP_READ | Odp.CAP_ATOMIC | Odp.CAP_SRQ_RECEIVE);
        resetOdpCaps();
    }

    /**
     * DevX in the general block of {@code m} (uids, umems, the DPA's general objects) and the DPA
     * block. The sizes are the model's: what a BlueField-3 reports is not public.
     */
    private static byte[] devxAndDpa(MemorySegment m) {
        HcaCap.LOG_MAX_UCTX.set(m, 0, 10);
        HcaCap.LOG_MAX_UMEM.set(m, 0, 16);
        HcaCap.UMEM_UID_0.set(m, 0, 1);
        long types = 1L << DpaCap.OBJ_DPA_MEM | 1L << DpaCap.OBJ_DPA_PROCESS | 1L << DpaCap.OBJ_DPA_THREAD | 1L << DpaCap.OBJ_DPA_OUTBOX
                | 1L << DpaCap.OBJ_DPA_WINDOW;
        m.set(CmdEntry.BE64, HcaCap.GENERAL_OBJ_TYPES, types);
        byte[] b = new byte[HcaCap.SIZE];
        MemorySegment d = MemorySegment.ofArray(b);
        DpaCap.THREAD_AFFINITY_SINGLE_HART.set(d, 0, 1);
        DpaCap.THREAD_AFFINITY_HART_GROUP.set(d, 0, 1);
        DpaCap.LOG_MAX_NUM_DPA_MEM_BLOCKS.set(d, 0, 16);
        DpaCap.PROCESS_WIN_PRIMARY.set(d, 0, 1);
        DpaCap.LOG_MAX_DPA_MEM.set(d, 0, 28); // 256 MiB, what the nvqual sample allocates
        DpaCap.LOG_MAX_DPA_THREADS_PER_PROCESS.set(d, 0, 8);
        DpaCap.LOG_MAX_DPA_PROCESS.set(d, 0, 6);
        DpaCap.LOG_MAX_DPA_THREADS.set(d, 0, 12);
        DpaCap.LOG_MAX_DPA_OUTBOX.set(d, 0, 8);
        DpaCap.DPA_MEM_BLOCK_SIZE.set(d, 0, 4096);
        DpaCap.MAX_NUM_DPA_THREAD_PER_GROUP.set(d, 0, 16);
        DpaCap.LOG_MAX_DPA_WINDOW.set(d, 0, 8);
        DpaCap.LOG_MAX_DPA_PARTITIONS.set(d, 0, 0);
        DpaCap.LOG_MAX_HARTS_PER_PARTITION.set(d, 0, 8); // 16 cores × 16 EUs (EUS_LIMIT)
        DpaCap.LOG_MAX_VHCA_PER_PARTITION.set(d, 0, 0);
        DpaCap.LOG_HARTS_PER_CORE.set(d, 0, 4); // 16 EUs per core
        DpaCap.OS_RESERVED_HARTS.set(d, 0, 2); // DpaConfig.bluefield3's reserved EUs
        DpaCap.KERNEL_MAX_RUN_TIME.set(d, 0, 120); // DpaConfig.bluefield3's watchdog at 1.8 GHz
        return b;
    }

    /** Whether the device reports DevX ({@code log_max_uctx} non-zero). */
    boolean devx() {
        return max(HcaCap.LOG_MAX_UCTX) != 0;
    }

    /** Whether {@code general_obj_types} has {@code objType}'s bit. */
    boolean generalObjType(int objType) {
        return objType < 64 && (MemorySegment.ofArray(maxGeneral).get(CmdEntry.BE64, HcaCap.GENERAL_OBJ_TYPES) & 1L << objType) != 0;
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.QUERY_HCA_CAP, in -> CommandTable.MIN_INPUT, HcaCap.QUERY_OUT_LEN, true, (opMod, in, out) -> query(opMod, out));
        t.add(Mlx5Cmd.SET_HCA_CAP, in -> HcaCap.SET_IN_LEN, CommandTable.MIN_OUTPUT, true, (opMod, in, out) -> set(opMod, in));
    }

    /** A current general capability. */
    int cur(IfcField f) {
        return f.get(MemorySegment.ofArray(curGeneral), 0);
    }

    /** A general capability's maximum. */
    int max(IfcField f) {
        return f.get(MemorySegment.ofArray(maxGeneral), 0);
    }

    /** {@code DISABLE_HCA}: the current values back to their defaults. */
    void reset() {
        System.arraycopy(maxGeneral, 0, curGeneral, 0, HcaCap.SIZE);
        resetOdpCaps();
    }

    /** The ODP block's current values: the maximum without the SRQ-receive bits the driver turns on. */
    private void resetOdpCaps() {
        System.arraycopy(maxOdp, 0, curOdp, 0, HcaCap.SIZE);
        MemorySegment c = MemorySegment.ofArray(curOdp);
        for (IfcField f : ODP_TRANSPORTS) {
            f.set(c, 0, f.get(c, 0) & ~Odp.CAP_SRQ_RECEIVE);
        }
    }

    private void query(int opMod, MemorySegment out) throws Refused {
        int type = opMod >>> 1;
        boolean max = (opMod & 1) == HcaCap.MODE_MAX;
        byte[] block = switch (type) {
            case HcaCap.TYPE_GENERAL -> max ? maxGeneral : curGeneral;
            case HcaCap.TYPE_ODP -> max ? maxOdp : curOdp;
            case HcaCap.TYPE_DPA -> {
                if (dpa == null) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CAP, "capability type 0x" + Integer.toHexString(type)
                            + " (DPA, peerdirect PRM extension v1): this device has no DPA");
                }
                yield dpa;
            }
            default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CAP, "capability type " + type + " is not reported by this model");
        };
        MemorySegment.copy(MemorySegment.ofArray(block), 0, out, HcaCap.OFFSET, HcaCap.SIZE);
    }

    private void set(int opMod, MemorySegment in) throws Refused {
        if ((opMod & 1) == 0 && opMod >>> 1 == HcaCap.TYPE_ODP) {
            setOdp(in);
            return;
        }
        if ((opMod & 1) != 0 || opMod >>> 1 != HcaCap.TYPE_GENERAL) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CAP, "SET_HCA_CAP op_mod 0x" + Integer.toHexString(opMod)
                    + ": only the general (type 0) and ODP (type 2) capabilities can be set");
        }
        MemorySegment max = MemorySegment.ofArray(maxGeneral);
        for (IfcField f : EDITABLE) {
            int v = f.get(in, HcaCap.OFFSET);
            if (Integer.compareUnsigned(v, f.get(max, 0)) > 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CAP,
                        String.format("capability at bit 0x%x: %d is above the maximum %d", f.bitOffset(), v, f.get(max, 0)));
            }
        }
        MemorySegment cur = MemorySegment.ofArray(curGeneral);
        for (IfcField f : EDITABLE) {
            f.set(cur, 0, f.get(in, HcaCap.OFFSET));
        }
    }

    /**
     * {@code SET_HCA_CAP} of the ODP block ({@code handle_hca_cap_odp}): each transport's bits, none
     * beyond the maximum (the rest of the block is read-only).
     */
    private void setOdp(MemorySegment in) throws Refused {
        MemorySegment max = MemorySegment.ofArray(maxOdp);
        for (IfcField f : ODP_TRANSPORTS) {
            int extra = f.get(in, HcaCap.OFFSET) & ~f.get(max, 0);
            if (extra != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CAP, String.format(
                        "ODP capability at bit 0x%x: bits 0x%x are not supported (maximum 0x%x)", f.bitOffset(), extra, f.get(max, 0)));
            }
        }
        MemorySegment cur = MemorySegment.ofArray(curOdp);
        for (IfcField f : ODP_TRANSPORTS) {
            f.set(cur, 0, f.get(in, HcaCap.OFFSET));
        }
    }

    /** The DPA block as {@code dpa:caps} prints it: one {@code name value} line per field ({@code dpa_capabilities}); empty without a DPA. */
    java.util.List<String> describeDpa() {
        java.util.List<String> l = new java.util.ArrayList<>();
        dpaValues().forEach((name, v) -> l.add(String.format("%-32s %d", name, v)));
        return l;
    }

    /** The DPA block's fields by their PRM names, in layout order ({@code dpa_capabilities}); empty without a DPA. */
    java.util.Map<String, Long> dpaValues() {
        if (dpa == null) {
            return java.util.Map.of();
        }
        MemorySegment d = MemorySegment.ofArray(dpa);
        java.util.Map<String, IfcField> f = new java.util.LinkedHashMap<>();
        f.put("thread_affinity_single_hart", DpaCap.THREAD_AFFINITY_SINGLE_HART);
        f.put("thread_affinity_hart_group", DpaCap.THREAD_AFFINITY_HART_GROUP);
        f.put("log_max_num_dpa_mem_blocks", DpaCap.LOG_MAX_NUM_DPA_MEM_BLOCKS);
        f.put("process_win_primary", DpaCap.PROCESS_WIN_PRIMARY);
        f.put("process_win_secondary", DpaCap.PROCESS_WIN_SECONDARY);
        f.put("dpa_auth_supported", DpaCap.DPA_AUTH_SUPPORTED);
        f.put("dpa_auth_enabled", DpaCap.DPA_AUTH_ENABLED);
        f.put("log_max_dpa_mem", DpaCap.LOG_MAX_DPA_MEM);
        f.put("log_max_dpa_threads_per_process", DpaCap.LOG_MAX_DPA_THREADS_PER_PROCESS);
        f.put("log_max_dpa_process", DpaCap.LOG_MAX_DPA_PROCESS);
        f.put("log_max_dpa_threads", DpaCap.LOG_MAX_DPA_THREADS);
        f.put("log_max_dpa_outbox", DpaCap.LOG_MAX_DPA_OUTBOX);
        f.put("dpa_mem_block_size", DpaCap.DPA_MEM_BLOCK_SIZE);
        f.put("max_num_dpa_thread_per_group", DpaCap.MAX_NUM_DPA_THREAD_PER_GROUP);
        f.put("log_max_dpa_window", DpaCap.LOG_MAX_DPA_WINDOW);
        f.put("log_max_dpa_partitions", DpaCap.LOG_MAX_DPA_PARTITIONS);
        f.put("log_max_harts_per_partition", DpaCap.LOG_MAX_HARTS_PER_PARTITION);
        f.put("log_max_vhca_per_partition", DpaCap.LOG_MAX_VHCA_PER_PARTITION);
        f.put("dpa_coredump_type", DpaCap.DPA_COREDUMP_TYPE);
        f.put("log_harts_per_core", DpaCap.LOG_HARTS_PER_CORE); // the model's extension from here on
        f.put("os_reserved_harts", DpaCap.OS_RESERVED_HARTS);
        f.put("kernel_max_run_time", DpaCap.KERNEL_MAX_RUN_TIME);
        java.util.Map<String, Long> v = new java.util.LinkedHashMap<>();
        f.forEach((name, field) -> v.put(name, Integer.toUnsignedLong(field.get(d, 0))));
        return v;
    }
}
