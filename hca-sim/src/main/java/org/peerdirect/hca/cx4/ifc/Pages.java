package org.peerdirect.hca.cx4.ifc;

/**
 * Firmware pages: {@code QUERY_PAGES}, {@code MANAGE_PAGES} and the UAR and PD commands that
 * carry one 24-bit index ({@code mlx5_ifc.h}). Pages are 4 KiB ({@code MLX5_ADAPTER_PAGE_SIZE}).
 */
public final class Pages {

    private Pages() {
    }

    public static final int ADAPTER_PAGE_SIZE = 4096;

    /** {@code QUERY_PAGES} op_mod ({@code MLX5_QUERY_PAGES_IN_OP_MOD_*}). */
    public static final int QUERY_BOOT = 1;
    public static final int QUERY_INIT = 2;
    public static final int QUERY_REGULAR = 3;
    /** {@code QUERY_PAGES} output: {@code num_pages}, signed 32-bit. */
    public static final long QUERY_OUT_NUM_PAGES = 0x0c;

    /** {@code MANAGE_PAGES} op_mod. */
    public static final int MANAGE_CANT_GIVE = 0;
    public static final int MANAGE_GIVE = 1;
    public static final int MANAGE_TAKE = 2;
    /** Input: {@code input_num_entries} at 0x0c, then {@code pas[]} of be64 addresses from 0x10. */
    public static final long MANAGE_IN_NUM_ENTRIES = 0x0c;
    public static final long MANAGE_IN_PAS = 0x10;
    /** TAKE output: {@code output_num_entries} at 0x08, {@code pas[]} from 0x10. */
    public static final long MANAGE_OUT_NUM_ENTRIES = 0x08;
    public static final long MANAGE_OUT_PAS = 0x10;

    /** {@code function_id} (bits 15:0 of dw2) of QUERY_PAGES, MANAGE_PAGES, ENABLE/DISABLE_HCA. */
    public static final IfcField FUNCTION_ID = new IfcField(0x50, 16);

    /** A 24-bit object index at byte 0x09 of an output ({@code alloc_uar_out.uar}, {@code alloc_pd_out.pd}, ...) or an input. */
    public static final IfcField INDEX24 = new IfcField(0x48, 24);

    /** {@code TEARDOWN_HCA} input {@code profile}: graceful, force close, prepare fast teardown. */
    public static final int TEARDOWN_GRACEFUL = 0;
    public static final int TEARDOWN_FORCE_CLOSE = 1;
    public static final int TEARDOWN_PREPARE_FAST = 2;
    public static final IfcField TEARDOWN_PROFILE = new IfcField(0x50, 16);

    /** {@code SET_DRIVER_VERSION} input: a 64-byte string at 0x10. */
    public static final long DRIVER_VERSION_IN = 0x10;
    public static final int DRIVER_VERSION_LEN = 64;
    public static final int SET_DRIVER_VERSION_IN_LEN = 0x50;

    /** UAR page layout: CQ doorbell (64-bit), BlueFlame registers. */
    public static final long UAR_CQ_DOORBELL = 0x20;
    public static final long UAR_BF_OFFSET = 0x800;
}
