package org.peerdirect.flexio;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxUmem;

/**
 * {@code struct flexio_mkey}: an mkey over a range of the process heap (its DUMEM), so NIC queues
 * DMA into DPA heap buffers (RDMA through it reaches DPA memory, never the host IOMMU).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_device_mkey_create</a>
 */
public final class FlexioMkey extends FlexioObject {

    private final long daddr;
    private final long len;
    /** A host mkey's pinned memory (null for a device mkey). */
    private final DevxUmem umem;

    private FlexioMkey(FlexioProcess p, DevxObj o, long daddr, long len, DevxUmem umem) {
        super(p, o, umem == null ? null : () -> Mlx5dv.devxUmemDereg(umem));
        this.daddr = daddr;
        this.len = len;
        this.umem = umem;
    }

    /**
     * {@code flexio_device_mkey_create(process, {pd, daddr, len, access})}: local and remote read
     * and write on the process's PD.
     *
     * @throws FlexioException FAILED for a range outside the heap
     */
    public static FlexioMkey deviceMkeyCreate(FlexioProcess p, long daddr, long len) {
        return deviceMkeyCreate(p, daddr, len, false);
    }

    /**
     * {@code flexio_device_mkey_create} with {@code IBV_ACCESS_REMOTE_ATOMIC} in the attr's access
     * when {@code atomic}: remote atomics (fetch-and-add, compare-and-swap) may target the range too.
     */
    public static FlexioMkey deviceMkeyCreate(FlexioProcess p, long daddr, long len, boolean atomic) {
        return make(p, "flexio_device_mkey_create", () -> {
            FlexioProcess.MemInfo m = p.processMemInfoGet();
            if (len <= 0 || daddr < m.base() || daddr + len > m.base() + m.size()) {
                throw new FlexioException(FlexioStatus.FAILED, String.format("[0x%x, +%d) is not in the heap [0x%x, +%d)",
                        daddr, len, m.base(), m.size()));
            }
            return new FlexioMkey(p, Mlx5dv.devxObjCreate(p.ctx, Prm.createUmemMkey(p.pdn(), daddr, len, p.dumemId(),
                    daddr - m.base(), atomic), 16), daddr, len, null);
        });
    }

    /**
     * An mkey of the process's PD over {@code len} bytes of the calling process's memory at
     * {@code va} (pinned as a DevX umem), what a FlexIO program gets from {@code ibv_reg_mr} on
     * {@code flexio_process_get_pd}: the key a window is configured with
     * ({@code flexio_dev_window_config}). Local and remote read and write.
     */
    public static FlexioMkey hostMkeyCreate(FlexioProcess p, long va, long len) {
        return hostMkeyCreate(p, va, len, true);
    }

    /**
     * As {@link #hostMkeyCreate(FlexioProcess, long, long)}; without {@code writable} the key allows
     * local and remote read only (what {@code ibv_reg_mr} without {@code IBV_ACCESS_LOCAL_WRITE}
     * gives): a write through it is the NIC's protection or remote access error.
     */
    public static FlexioMkey hostMkeyCreate(FlexioProcess p, long va, long len, boolean writable) {
        return make(p, "host mkey (ibv_reg_mr on the process's PD)", () -> {
            // the umem writable either way (the firmware takes an mkey only over a writable umem); the mkey's bits decide
            DevxUmem um = Mlx5dv.devxUmemReg(p.ctx, va, len, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ);
            try {
                return new FlexioMkey(p, Mlx5dv.devxObjCreate(p.ctx, Prm.createUmemMkey(p.pdn(), va, len, um.umemId(), 0, false, writable), 16),
                        va, len, um);
            } catch (RuntimeException e) {
                Mlx5dv.devxUmemDereg(um);
                throw e;
            }
        });
    }

    /** {@code flexio_mkey_get_id}: the key (lkey = rkey) WQEs name. */
    public int id() {
        return Prm.index(obj) << 8;
    }

    @Override
    public String toString() {
        return String.format("%s mkey 0x%x over [0x%x, +%d) of %s", umem == null ? "device" : "host", id(), daddr, len, process);
    }
}
