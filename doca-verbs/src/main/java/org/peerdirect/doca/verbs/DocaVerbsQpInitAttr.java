package org.peerdirect.doca.verbs;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpaCompletion;

/**
 * {@code struct doca_verbs_qp_init_attr}: what {@link DocaVerbsQp#create} builds a QP from. Set:
 * the PD ([model] the DOCA device's PD, {@code doca_rdma_bridge_get_dev_pd}: {@code doca_verbs_pd}
 * objects are not built), the QP type (RC only), the send and receive work-request counts, the max
 * SGEs, the send and receive DOCA DPA completion contexts (they stand for the CQs), and the
 * external data path on the DPA (required: the host data path is not built).
 */
public final class DocaVerbsQpInitAttr {

    /** {@code enum doca_verbs_qp_type}. */
    public static final int QP_TYPE_RC = 0x0, QP_TYPE_UC = 0x1, QP_TYPE_UD = 0x2;
    /** Work requests a queue can have. */
    public static final int MAX_WR = 1 << 12;
    /** Receive SGEs a receive WQE holds (a 64-byte stride: three data segments and the terminator). */
    public static final int MAX_RECEIVE_SGES = 3;
    /** Send SGEs a one-block send WQE holds after its control and remote-address segments. */
    public static final int MAX_SEND_SGES = org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.MAX_SEND_SGE;

    DocaDev pd;
    int qpType = QP_TYPE_RC;
    int sqWr = 64;
    int rqWr = 64;
    int sendMaxSges = 1;
    int receiveMaxSges = 1;
    DocaDpaCompletion sendCompletion;
    DocaDpaCompletion receiveCompletion;
    boolean externalDatapath;
    private boolean destroyed;

    private DocaVerbsQpInitAttr() {
    }

    /** {@code doca_verbs_qp_init_attr_create}. */
    public static DocaVerbsQpInitAttr create() {
        return new DocaVerbsQpInitAttr();
    }

    /** {@code doca_verbs_qp_init_attr_set_pd}: [model] the device whose PD the QP is on. */
    public void setPd(DocaDev dev) {
        live("doca_verbs_qp_init_attr_set_pd");
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_qp_init_attr_set_pd: null PD");
        pd = dev;
    }

    /** {@code doca_verbs_qp_init_attr_set_qp_type}: RC; UC and UD are refused at create (NOT_SUPPORTED). */
    public void setQpType(int type) {
        live("doca_verbs_qp_init_attr_set_qp_type");
        DocaException.check(type == QP_TYPE_RC || type == QP_TYPE_UC || type == QP_TYPE_UD, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_verbs_qp_init_attr_set_qp_type: " + type + " is no doca_verbs_qp_type");
        qpType = type;
    }

    /** {@code doca_verbs_qp_init_attr_set_sq_wr}: send WQEs (rounded up to a power of two). */
    public void setSqWr(int n) {
        live("doca_verbs_qp_init_attr_set_sq_wr");
        DocaException.check(n >= 1 && n <= MAX_WR, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_qp_init_attr_set_sq_wr: " + n + " (1.." + MAX_WR + ")");
        sqWr = n;
    }

    /** {@code doca_verbs_qp_init_attr_set_rq_wr}: receive WQEs (rounded up to a power of two). */
    public void setRqWr(int n) {
        live("doca_verbs_qp_init_attr_set_rq_wr");
        DocaException.check(n >= 1 && n <= MAX_WR, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_qp_init_attr_set_rq_wr: " + n + " (1.." + MAX_WR + ")");
        rqWr = n;
    }

    /** {@code doca_verbs_qp_init_attr_set_send_max_sges}. */
    public void setSendMaxSges(int n) {
        live("doca_verbs_qp_init_attr_set_send_max_sges");
        DocaException.check(n >= 1 && n <= MAX_SEND_SGES, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_verbs_qp_init_attr_set_send_max_sges: " + n + " (1.." + MAX_SEND_SGES + ")");
        sendMaxSges = n;
    }

    /** {@code doca_verbs_qp_init_attr_set_receive_max_sges}. */
    public void setReceiveMaxSges(int n) {
        live("doca_verbs_qp_init_attr_set_receive_max_sges");
        DocaException.check(n >= 1 && n <= MAX_RECEIVE_SGES, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_verbs_qp_init_attr_set_receive_max_sges: " + n + " (1.." + MAX_RECEIVE_SGES + ")");
        receiveMaxSges = n;
    }

    /** {@code doca_verbs_qp_init_attr_set_send_dpa_completion}: the send CQ. */
    public void setSendDpaCompletion(DocaDpaCompletion comp) {
        live("doca_verbs_qp_init_attr_set_send_dpa_completion");
        DocaException.check(comp != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_qp_init_attr_set_send_dpa_completion: null completion context");
        sendCompletion = comp;
    }

    /** {@code doca_verbs_qp_init_attr_set_receive_dpa_completion}: the receive CQ. */
    public void setReceiveDpaCompletion(DocaDpaCompletion comp) {
        live("doca_verbs_qp_init_attr_set_receive_dpa_completion");
        DocaException.check(comp != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_qp_init_attr_set_receive_dpa_completion: null completion context");
        receiveCompletion = comp;
    }

    /** {@code doca_verbs_qp_init_attr_set_external_datapath_en}: the data path is on the DPA. */
    public void setExternalDatapathEn(boolean enable) {
        live("doca_verbs_qp_init_attr_set_external_datapath_en");
        externalDatapath = enable;
    }

    /** {@code doca_verbs_qp_init_attr_get_sq_wr}, and the like: the values as set. */
    public int getSqWr() {
        return sqWr;
    }

    public int getRqWr() {
        return rqWr;
    }

    public int getSendMaxSges() {
        return sendMaxSges;
    }

    public int getReceiveMaxSges() {
        return receiveMaxSges;
    }

    public int getQpType() {
        return qpType;
    }

    /** {@code doca_verbs_qp_init_attr_destroy}: INVALID_VALUE the second time. */
    public void destroy() {
        live("doca_verbs_qp_init_attr_destroy");
        destroyed = true;
    }

    DocaVerbsQpInitAttr copy() {
        DocaVerbsQpInitAttr c = new DocaVerbsQpInitAttr();
        c.pd = pd;
        c.qpType = qpType;
        c.sqWr = sqWr;
        c.rqWr = rqWr;
        c.sendMaxSges = sendMaxSges;
        c.receiveMaxSges = receiveMaxSges;
        c.sendCompletion = sendCompletion;
        c.receiveCompletion = receiveCompletion;
        c.externalDatapath = externalDatapath;
        return c;
    }

    void live(String w) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the init attributes were destroyed");
    }
}
