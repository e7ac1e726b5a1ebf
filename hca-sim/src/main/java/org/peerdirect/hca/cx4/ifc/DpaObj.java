package org.peerdirect.hca.cx4.ifc;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;

/**
 * The DPA general objects' contexts: <b>peerdirect PRM extension v1</b>. NVIDIA publishes the
 * object types ({@code mlx5_prm.h}: DPA_MEM 0x28, DPA_PROCESS 0x2a, DPA_THREAD 0x2b, DPA_OUTBOX
 * 0x2d, DPA_WINDOW 0x39) but not their layouts (libflexio builds them in a closed library), so the
 * model defines them here, carrying what DPA_MODEL.md §2.3 lists. Not NVIDIA's layout: a driver
 * written against this file talks to this model only.
 *
 * <p>Offsets count from the object's context: after the 16-byte {@code general_obj_in_cmd_hdr} in
 * the input, after the 16-byte output header in the output. Big-endian dwords; a 64-bit field is
 * two dwords, high first ({@link #get64}/{@link #set64}).
 */
public final class DpaObj {

    private DpaObj() {
    }

    public static final int OBJ_DPA_MEM = 0x28;
    public static final int OBJ_DPA_PROCESS = 0x2a;
    public static final int OBJ_DPA_THREAD = 0x2b;
    public static final int OBJ_DPA_OUTBOX = 0x2d;
    public static final int OBJ_DPA_WINDOW = 0x39;

    /** Every DPA object context is this long (input and output). */
    public static final int CONTEXT_SIZE = 0x40;

    // DPA_MEM: create {size}; out and query {daddr, DUMEM id}
    public static final long MEM_SIZE = 0x00;
    public static final long MEM_DADDR = 0x08;
    /** out and query: the DUMEM naming this DPA_MEM's bytes ({@link #DUMEM}). */
    public static final IfcField MEM_DUMEM_ID = new IfcField(0x10 * 8 + 8, 24);

    // DPA_PROCESS: create {image DPA_MEM, image length, heap size, pd, uar}; out {heap base}; query adds the status
    public static final IfcField PROCESS_IMAGE_MEM = new IfcField(0x00 * 8, 32);
    public static final IfcField PROCESS_IMAGE_LEN = new IfcField(0x04 * 8, 32);
    public static final long PROCESS_HEAP_SIZE = 0x08;
    public static final IfcField PROCESS_PD = new IfcField(0x10 * 8 + 8, 24);
    public static final IfcField PROCESS_UAR = new IfcField(0x14 * 8 + 8, 24);
    public static final long PROCESS_HEAP_BASE = 0x18;
    /** {@code dpa_process_status}: 0 ok, 1..63 RTOS, 0x40 process finish, 0x42 illegal user code, 0x80..0xff user. */
    public static final IfcField PROCESS_STATUS = new IfcField(0x20 * 8 + 24, 8);
    /** out and query: the process DUMEM ({@code flexio_process_get_dumem_id}), its heap's bytes ({@link #DUMEM}). */
    public static final IfcField PROCESS_DUMEM_ID = new IfcField(0x24 * 8 + 8, 24);
    /** query: the process's heap size. */
    public static final long PROCESS_QUERY_HEAP_SIZE = 0x28;

    /**
     * DUMEM (SNAP's alias type {@code DPA_DUMEM 0xff13}; here a umem id, no object of its own):
     * the bytes of a DPA_MEM ({@link #MEM_DUMEM_ID}) or of a process heap ({@link #PROCESS_DUMEM_ID})
     * as a umem, owned by the uid that created the object and destroyed with it. {@code CREATE_MKEY}
     * with {@code mkey_umem_valid} 1, {@code mkey_umem_id} a DUMEM and {@code mkey_umem_offset} the
     * byte offset from the DUMEM's first byte (its DPA address: the DPA_MEM's daddr or the heap
     * base), {@code start_addr} at the same place in its 4 KiB page (libflexio passes the DPA
     * address), is {@code flexio_device_mkey_create}: RDMA (WRITE, READ, SEND placement, atomics)
     * through it reads and writes DPA memory directly, never through the host IOMMU, coherently
     * for DPA threads (NIC → DPA is coherent; a NIC read of bytes a thread did not write back is
     * the memory model's C1). {@code DESTROY_UMEM} of a DUMEM is refused; its object's destroy is
     * refused while an mkey or queue holds it ({@code BAD_RES_STATE}).
     */
    public static final int DUMEM = 0xff13;

    // DPA_THREAD: create {process, entry symbol index, affinity, continuable, arg, tls}; modify {state}; query adds state, EU, activations
    public static final IfcField THREAD_PROCESS = new IfcField(0x00 * 8, 32);
    public static final IfcField THREAD_ENTRY_INDEX = new IfcField(0x04 * 8, 32);
    /** 0 none, 1 strict (one EU), 2 group ({@code flexio_affinity_type}). */
    public static final IfcField THREAD_AFFINITY_TYPE = new IfcField(0x08 * 8, 2);
    public static final IfcField THREAD_CONTINUABLE = new IfcField(0x08 * 8 + 2, 1);
    public static final IfcField THREAD_AFFINITY_ID = new IfcField(0x08 * 8 + 16, 16);
    public static final long THREAD_ARG = 0x10;
    public static final long THREAD_TLS = 0x18;
    /** modify: bit 0 selects {@link #THREAD_STATE}. */
    public static final IfcField THREAD_MODIFY_SELECT = new IfcField(0x20 * 8, 32);
    public static final int THREAD_SELECT_STATE = 1;
    /** modify: 1 run (triggerable), 2 trigger (the host's doorbell); query: the RTOS state (0 created .. 6 process ended). */
    public static final IfcField THREAD_STATE = new IfcField(0x24 * 8 + 24, 8);
    public static final int THREAD_STATE_RUN = 1;
    public static final int THREAD_STATE_TRIGGER = 2;
    /** query: the EU it runs on, 0xffff when none. */
    public static final IfcField THREAD_EU = new IfcField(0x28 * 8 + 16, 16);
    public static final IfcField THREAD_ACTIVATIONS = new IfcField(0x2c * 8, 32);
    /**
     * query: what the thread's entry returned the last time it was a {@code __dpa_rpc__} run as
     * the thread's own entry (the RTOS keeps its {@code uint64_t} result), 0 before. A debugging
     * aid: {@code flexio_process_call} no longer reads it (its answer comes through a host mailbox,
     * written by flexio-dev's RPC handler through a window; no firmware command per call).
     */
    public static final long THREAD_RPC_RESULT = 0x30;

    // DPA_OUTBOX: create {process}; query adds the process's uar
    public static final IfcField OUTBOX_PROCESS = new IfcField(0x00 * 8, 32);
    public static final IfcField OUTBOX_UAR = new IfcField(0x04 * 8 + 8, 24);

    // DPA_WINDOW: create {process, pd}
    public static final IfcField WINDOW_PROCESS = new IfcField(0x00 * 8, 32);
    public static final IfcField WINDOW_PD = new IfcField(0x04 * 8 + 8, 24);

    public static long get64(MemorySegment s, long at) {
        return (long) s.get(BE32, at) << 32 | s.get(BE32, at + 4) & 0xffffffffL;
    }

    public static void set64(MemorySegment s, long at, long v) {
        s.set(BE32, at, (int) (v >>> 32));
        s.set(BE32, at + 4, (int) v);
    }
}
