package org.peerdirect.ib.core.objects;

import java.util.List;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The verbs objects of every open context now ({@code rdma resource show}: {@code ctx}, {@code pd},
 * {@code mr}, {@code qp}, {@code cq}). A snapshot: objects created or destroyed while it is taken
 * may or may not be in it; nothing is locked against the data path.
 */
@ProviderType
public interface UverbsObjects {

    /** A memory region: its keys and range, what backs it, and whether it still serves. */
    record Mr(int lkey, int rkey, long addr, long length, int access, Kind kind, State state) {
    }

    /** What backs an MR (the umem flavour the core chose). */
    enum Kind {
        PINNED, PEER, ODP_EXPLICIT, ODP_IMPLICIT, DMA_BUF
    }

    /** An MR serves until a peer client or an exporter invalidates it, or it is deregistered (by anyone). */
    enum State {
        LIVE, INVALIDATED, DEREGISTERED
    }

    record Qp(int qpn, String type, String state) {
    }

    record Cq(int cqe) {
    }

    /** One context a process opened on a device, with what it made. */
    record Context(String device, int pid, String process, int pds, List<Mr> mrs, List<Qp> qps, List<Cq> cqs) {
    }

    /** Every open context of every device, by device then pid. */
    List<Context> contexts();
}
