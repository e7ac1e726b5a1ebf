package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;

/**
 * One send WQE slot of a send queue: control segment (opcode, flags, immediate), remote-address
 * segment (RDMA, atomics), atomic segment, datagram segment (UD address vector), data segments
 * (address, byte count, lkey) or inline data. The driver fills a slot it owns (index between the
 * hardware's consumer index and the queue size ahead of it), then rings the doorbell with the new
 * producer index.
 *
 * <p>The slots are the engine's decoded view: both personalities fetch the WQEs the driver or the
 * user library wrote as bytes in host memory (or carried in a BlueFlame write) and decode each
 * into the next slot; the fields are exactly those of the hardware segments.
 */
public final class SendWqe {
    public int opcode;
    /** {@link Wqe}{@code .CTRL_*} bits. */
    public int ctrl;
    public int imm;
    public long remoteAddr;
    public int rkey;
    /** Atomic segment: compare (CS) or add (FA) value, and swap value (CS); ATOMIC WRITE: the 8 bytes stored. */
    public long compareAdd;
    public long swap;
    /** RDMA FLUSH: the FETH placement type and selectivity level ({@link Wqe}{@code .FLUSH_*}); its length is {@link #length}. */
    public int flushType;
    public int flushLevel;
    /** Datagram segment: destination LID, QPN and Q_Key; a negative Q_Key means "the QP's". */
    public int dlid;
    public int remoteQpn;
    public int remoteQkey;
    /**
     * Datagram segment: the datagram carries a GRH (the address vector's {@code grh} bit, set from
     * {@code is_global}; on RoCE always, the GRH standing for the IP header). Without one the
     * responder leaves the receive buffer's first 40 bytes alone and reports no GRH.
     */
    public boolean grh;
    /** Datagram segment with a GRH: the address vector's destination GID (the GRH's DGID). */
    public final byte[] dgid = new byte[16];
    /** XRC segment: the XRC SRQ at the target that receives this message (XRCETH); read on XRC send QPs only. */
    public int xrcSrqn;
    public int numSge;
    public final long[] addr;
    public final int[] byteCount;
    public final int[] lkey;
    /** Inline data (max_inline_data bytes), valid for {@code inlineLen} bytes when CTRL_INLINE. */
    public final MemorySegment inline;
    public int inlineLen;
    /** The message length: the data segments' sum, or the inline length; an RDMA FLUSH's range length. */
    public long length;
    /** A REG_UMR QP's work request (null on other QPs; the fetch allocates it once per slot). */
    public UmrWqe umr;

    SendWqe(int maxSge, MemorySegment inline) {
        addr = new long[Math.max(1, maxSge)];
        byteCount = new int[Math.max(1, maxSge)];
        lkey = new int[Math.max(1, maxSge)];
        this.inline = inline;
    }

    /** Data-segment capacity of this slot. */
    public int maxSge() {
        return addr.length;
    }
}
