package org.peerdirect.doca.rdma;

/**
 * {@code struct doca_rdma_connection}: one RC connection of a {@link DocaRdma} context, made by
 * {@link DocaRdma#export} and connected by {@link DocaRdma#connect}. Its id is what DPA posts name
 * and what its completions carry as user data ({@code doca_dpa_dev_get_completion_user_data}).
 */
public final class DocaRdmaConnection {

    final DocaRdma rdma;
    final int id;
    final org.peerdirect.flexio.FlexioQp qp;
    final long wq;
    final long dbr;
    boolean connected;

    DocaRdmaConnection(DocaRdma rdma, int id, org.peerdirect.flexio.FlexioQp qp, long wq, long dbr) {
        this.rdma = rdma;
        this.id = id;
        this.qp = qp;
        this.wq = wq;
        this.dbr = dbr;
    }

    /** {@code doca_rdma_connection_get_id}. */
    public int getId() {
        return id;
    }

    /** The QP number of the connection (for {@code dpa:} commands and tests). */
    public int qpNum() {
        return qp.qpNum();
    }

    /** Whether {@link DocaRdma#connect} connected it. */
    public boolean isConnected() {
        return connected;
    }

    @Override
    public String toString() {
        return "doca_rdma_connection " + id + " (qp 0x" + Integer.toHexString(qp.qpNum()) + (connected ? ", connected)" : ")");
    }
}
