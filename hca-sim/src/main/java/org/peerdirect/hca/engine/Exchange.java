package org.peerdirect.hca.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The scratch one request is answered with, and who sent it: the cursors over the requester's
 * data ({@link #local}) and the responder's ({@link #remote}), the GRH staging, a receive-WQE
 * copy, and the sender's QPN, LID, PSN and GID as the {@link Responder} reports them. In one JVM
 * the {@link Requester} is its own exchange (it runs the responder in its thread); a port on a
 * wire has one for its receive thread ({@link WireResp}). Owned by one thread at a time.
 */
class Exchange {
    final Segs local;
    final Segs remote;
    final Segs grhSrc = new Segs(1);
    final MemorySegment scratch;
    final RecvWqe recvCopy = new RecvWqe(HcaDevice.MAX_SGE);
    /** The responder reported the current request's error in a receive completion (so no affiliated event). */
    boolean errorInReceiveCqe;
    /**
     * For the request being answered: the XRC SRQ its XRCETH names (null when the responder is not
     * an XRC target); see {@link Responder#keyPdn}.
     */
    HwSrq xrcSrq;
    /** The sender of the request being answered: its QPN, its port's LID (0 on Ethernet), the request's PSN. */
    int srcQpn;
    int slid;
    int srcPsn;
    /** The sending QP when it is in this JVM (its port names its GID), else null and {@link #sgid} holds the GID from the wire. */
    HwQp senderQp;
    /** A multi-packet RDMA WRITE with immediate on a wire: the message's length for the receive completion (-1: the request's). */
    long msgLen = -1;
    final byte[] sgid = new byte[16];

    Exchange(Arena arena, int segs) {
        this.scratch = arena.allocate(64, 8);
        this.local = new Segs(segs);
        this.remote = new Segs(segs);
    }

    /** The sender's GID into 16 bytes at {@code off} (a UD receive's GRH). */
    void writeSgid(MemorySegment g, long off) {
        HwQp s = senderQp;
        if (s != null) {
            s.dev.writePortGid(s.dev.ports[s.portNum - 1], g, off);
        } else {
            MemorySegment.copy(sgid, 0, g, ValueLayout.JAVA_BYTE, off, 16);
        }
    }

    /** This exchange's request comes from {@code sender}, a QP of this JVM. */
    void from(HwQp sender) {
        senderQp = sender;
        srcQpn = sender.qpn;
        slid = sender.dev.ports[sender.portNum - 1].lid;
        srcPsn = sender.sqPsn;
        msgLen = -1;
    }
}
