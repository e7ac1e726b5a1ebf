package org.peerdirect.flexio;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * {@code struct flexio_mkey}: an mkey over a range of the process heap (its DUMEM), so NIC queues
 * DMA into DPA heap buffers (RDMA through it reaches DPA memory, never the host IOMMU).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_device_mkey_create</a>
 */
public final class FlexioMkey extends FlexioObject {

    private final long daddr;
    private final long len;

    private FlexioMkey(FlexioProcess p, DevxObj o, long daddr, long len) {
        super(p, o);
        this.daddr = daddr;
        this.len = len;
    }

    /**
     * {@code flexio_device_mkey_create(process, {pd, daddr, len, access})}: local and remote read
     * and write on the process's PD.
     *
     * @throws FlexioException FAILED for a range outside the heap
     */
    public static FlexioMkey deviceMkeyCreate(FlexioProcess p, long daddr, long len) {
        return make(p, "flexio_device_mkey_create", () -> {
            FlexioProcess.MemInfo m = p.processMemInfoGet();
            if (len <= 0 || daddr < m.base() || daddr + len > m.base() + m.size()) {
                throw new FlexioException(FlexioStatus.FAILED, String.format("[0x%x, +%d) is not in the heap [0x%x, +%d)",
                        daddr, len, m.base(), m.size()));
            }
            return new FlexioMkey(p, Mlx5dv.devxObjCreate(p.ctx, Prm.createUmemMkey(p.pdn(), daddr, len, p.dumemId(),
                    daddr - m.base()), 16), daddr, len);
        });
    }

    /** {@code flexio_mkey_get_id}: the key (lkey = rkey) WQEs name. */
    public int id() {
        return Prm.index(obj) << 8;
    }

    @Override
    public String toString() {
        return String.format("device mkey 0x%x over [0x%x, +%d) of %s", id(), daddr, len, process);
    }
}
