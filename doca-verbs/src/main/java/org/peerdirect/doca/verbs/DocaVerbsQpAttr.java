package org.peerdirect.doca.verbs;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs;

/**
 * {@code struct doca_verbs_qp_attr}: the attributes a {@link DocaVerbsQp#modify} applies, each
 * named by its bit of the mask ({@code DOCA_VERBS_QP_ATTR_*}); what {@link DocaVerbsQp#query}
 * fills. The setters check the ranges the PRM fields hold (INVALID_VALUE naming the field); which
 * attributes a transition needs is {@link DocaVerbsQp#modify}'s check. Each {@code setX}/{@code getX}
 * is {@code doca_verbs_qp_attr_set_x}/{@code _get_x} of the C API.
 */
public final class DocaVerbsQpAttr {

    /** {@code enum doca_verbs_qp_state}: also the values the DPA reads ({@code DocaDpaDevVerbs.QP_STATE_*}). */
    public static final int QP_STATE_RST = DocaDpaDevVerbs.QP_STATE_RST, QP_STATE_INIT = DocaDpaDevVerbs.QP_STATE_INIT,
            QP_STATE_RTR = DocaDpaDevVerbs.QP_STATE_RTR, QP_STATE_RTS = DocaDpaDevVerbs.QP_STATE_RTS, QP_STATE_SQD = DocaDpaDevVerbs.QP_STATE_SQD,
            QP_STATE_SQE = DocaDpaDevVerbs.QP_STATE_SQE, QP_STATE_ERR = DocaDpaDevVerbs.QP_STATE_ERR;

    /** {@code DOCA_VERBS_QP_ATTR_*}: the mask bits [model values]. */
    public static final int NEXT_STATE = 1 << 0, ALLOW_REMOTE_WRITE = 1 << 1, ALLOW_REMOTE_READ = 1 << 2, ALLOW_REMOTE_ATOMIC = 1 << 3,
            PKEY_INDEX = 1 << 4, PORT_NUM = 1 << 5, RQ_PSN = 1 << 6, SQ_PSN = 1 << 7, DEST_QP_NUM = 1 << 8, MIN_RNR_TIMER = 1 << 9,
            PATH_MTU = 1 << 10, AH_ATTR = 1 << 11, ACK_TIMEOUT = 1 << 12, RETRY_CNT = 1 << 13, RNR_RETRY = 1 << 14,
            MAX_QP_RD_ATOMIC = 1 << 15, MAX_DEST_RD_ATOMIC = 1 << 16, CURRENT_STATE = 1 << 17;
    /** The names of the bits, for messages. */
    static final String[] NAMES = {"NEXT_STATE", "ALLOW_REMOTE_WRITE", "ALLOW_REMOTE_READ", "ALLOW_REMOTE_ATOMIC", "PKEY_INDEX", "PORT_NUM",
        "RQ_PSN", "SQ_PSN", "DEST_QP_NUM", "MIN_RNR_TIMER", "PATH_MTU", "AH_ATTR", "ACK_TIMEOUT", "RETRY_CNT", "RNR_RETRY",
        "MAX_QP_RD_ATOMIC", "MAX_DEST_RD_ATOMIC", "CURRENT_STATE"};

    /** {@code enum doca_mtu_size}. */
    public static final int MTU_SIZE_256_BYTES = 0, MTU_SIZE_512_BYTES = 1, MTU_SIZE_1K_BYTES = 2, MTU_SIZE_2K_BYTES = 3,
            MTU_SIZE_4K_BYTES = 4;

    int nextState;
    int currentState;
    boolean allowRemoteWrite;
    boolean allowRemoteRead;
    boolean allowRemoteAtomic;
    int pkeyIndex;
    int portNum;
    int rqPsn;
    int sqPsn;
    int destQpNum;
    int minRnrTimer;
    int pathMtu = MTU_SIZE_1K_BYTES;
    DocaVerbsAhAttr ahAttr;
    int ackTimeout;
    int retryCnt;
    int rnrRetry;
    int maxQpRdAtomic = 1;
    int maxDestRdAtomic = 1;
    private boolean destroyed;

    private DocaVerbsQpAttr() {
    }

    /** {@code doca_verbs_qp_attr_create}. */
    public static DocaVerbsQpAttr create() {
        return new DocaVerbsQpAttr();
    }

    /** {@code doca_verbs_qp_attr_destroy}: INVALID_VALUE the second time. */
    public void destroy() {
        live("doca_verbs_qp_attr_destroy");
        destroyed = true;
    }

    /** The names of the bits of {@code mask}, for messages. */
    static String names(int mask) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < NAMES.length; i++) {
            if ((mask & 1 << i) != 0) {
                b.append(b.isEmpty() ? "" : "|").append(NAMES[i]);
            }
        }
        return b.isEmpty() ? "none" : b.toString();
    }

    public void setNextState(int state) {
        range("next_state", state, QP_STATE_RST, QP_STATE_ERR);
        nextState = state;
    }

    public void setCurrentState(int state) {
        range("current_state", state, QP_STATE_RST, QP_STATE_ERR);
        currentState = state;
    }

    public void setAllowRemoteWrite(boolean allow) {
        live("doca_verbs_qp_attr_set_allow_remote_write");
        allowRemoteWrite = allow;
    }

    public void setAllowRemoteRead(boolean allow) {
        live("doca_verbs_qp_attr_set_allow_remote_read");
        allowRemoteRead = allow;
    }

    public void setAllowRemoteAtomic(boolean allow) {
        live("doca_verbs_qp_attr_set_allow_remote_atomic");
        allowRemoteAtomic = allow;
    }

    public void setPkeyIndex(int index) {
        range("pkey_index", index, 0, 0xffff);
        pkeyIndex = index;
    }

    public void setPortNum(int port) {
        range("port_num", port, 1, 0xff);
        portNum = port;
    }

    public void setRqPsn(int psn) {
        range("rq_psn", psn, 0, 0xffffff);
        rqPsn = psn;
    }

    public void setSqPsn(int psn) {
        range("sq_psn", psn, 0, 0xffffff);
        sqPsn = psn;
    }

    public void setDestQpNum(int qpn) {
        range("dest_qp_num", qpn, 1, 0xffffff);
        destQpNum = qpn;
    }

    public void setMinRnrTimer(int t) {
        range("min_rnr_timer", t, 0, 31);
        minRnrTimer = t;
    }

    public void setPathMtu(int mtu) {
        range("path_mtu", mtu, MTU_SIZE_256_BYTES, MTU_SIZE_4K_BYTES);
        pathMtu = mtu;
    }

    /** {@code doca_verbs_qp_attr_set_ah_attr}: the attributes are read at the modify that names {@link #AH_ATTR}. */
    public void setAhAttr(DocaVerbsAhAttr ah) {
        live("doca_verbs_qp_attr_set_ah_attr");
        DocaException.check(ah != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_qp_attr_set_ah_attr: null AH attributes");
        ahAttr = ah;
    }

    public void setAckTimeout(int t) {
        range("ack_timeout", t, 0, 31);
        ackTimeout = t;
    }

    public void setRetryCnt(int n) {
        range("retry_cnt", n, 0, 7);
        retryCnt = n;
    }

    public void setRnrRetry(int n) {
        range("rnr_retry", n, 0, 7);
        rnrRetry = n;
    }

    public void setMaxQpRdAtomic(int n) {
        range("max_qp_rd_atomic", n, 1, 128);
        maxQpRdAtomic = n;
    }

    public void setMaxDestRdAtomic(int n) {
        range("max_dest_rd_atomic", n, 1, 128);
        maxDestRdAtomic = n;
    }

    public int getNextState() {
        return nextState;
    }

    public int getCurrentState() {
        return currentState;
    }

    public boolean getAllowRemoteWrite() {
        return allowRemoteWrite;
    }

    public boolean getAllowRemoteRead() {
        return allowRemoteRead;
    }

    public boolean getAllowRemoteAtomic() {
        return allowRemoteAtomic;
    }

    public int getPkeyIndex() {
        return pkeyIndex;
    }

    public int getPortNum() {
        return portNum;
    }

    public int getRqPsn() {
        return rqPsn;
    }

    public int getSqPsn() {
        return sqPsn;
    }

    public int getDestQpNum() {
        return destQpNum;
    }

    public int getMinRnrTimer() {
        return minRnrTimer;
    }

    public int getPathMtu() {
        return pathMtu;
    }

    public int getAckTimeout() {
        return ackTimeout;
    }

    public int getRetryCnt() {
        return retryCnt;
    }

    public int getRnrRetry() {
        return rnrRetry;
    }

    public int getMaxQpRdAtomic() {
        return maxQpRdAtomic;
    }

    public int getMaxDestRdAtomic() {
        return maxDestRdAtomic;
    }

    /** Copies the attributes {@code mask} names from {@code src} (the QP's record of what it was given). */
    void apply(DocaVerbsQpAttr src, int mask) {
        if ((mask & ALLOW_REMOTE_WRITE) != 0) {
            allowRemoteWrite = src.allowRemoteWrite;
        }
        if ((mask & ALLOW_REMOTE_READ) != 0) {
            allowRemoteRead = src.allowRemoteRead;
        }
        if ((mask & ALLOW_REMOTE_ATOMIC) != 0) {
            allowRemoteAtomic = src.allowRemoteAtomic;
        }
        pkeyIndex = (mask & PKEY_INDEX) != 0 ? src.pkeyIndex : pkeyIndex;
        portNum = (mask & PORT_NUM) != 0 ? src.portNum : portNum;
        rqPsn = (mask & RQ_PSN) != 0 ? src.rqPsn : rqPsn;
        sqPsn = (mask & SQ_PSN) != 0 ? src.sqPsn : sqPsn;
        destQpNum = (mask & DEST_QP_NUM) != 0 ? src.destQpNum : destQpNum;
        minRnrTimer = (mask & MIN_RNR_TIMER) != 0 ? src.minRnrTimer : minRnrTimer;
        pathMtu = (mask & PATH_MTU) != 0 ? src.pathMtu : pathMtu;
        ackTimeout = (mask & ACK_TIMEOUT) != 0 ? src.ackTimeout : ackTimeout;
        retryCnt = (mask & RETRY_CNT) != 0 ? src.retryCnt : retryCnt;
        rnrRetry = (mask & RNR_RETRY) != 0 ? src.rnrRetry : rnrRetry;
        maxQpRdAtomic = (mask & MAX_QP_RD_ATOMIC) != 0 ? src.maxQpRdAtomic : maxQpRdAtomic;
        maxDestRdAtomic = (mask & MAX_DEST_RD_ATOMIC) != 0 ? src.maxDestRdAtomic : maxDestRdAtomic;
        if ((mask & AH_ATTR) != 0) {
            ahAttr = snapshot(src.ahAttr);
        }
    }

    /** The AH as it was at the modify (later changes to the caller's object do not move the QP's path). */
    private static DocaVerbsAhAttr snapshot(DocaVerbsAhAttr a) {
        if (a == null) {
            return null;
        }
        DocaVerbsAhAttr c = DocaVerbsAhAttr.create(a.dev);
        if (a.gid != null) {
            c.setGid(a.gid);
        }
        c.addrType = a.addrType;
        c.sgidIndex = a.sgidIndex;
        c.hopLimit = a.hopLimit;
        c.trafficClass = a.trafficClass;
        return c;
    }

    private void range(String field, int v, int lo, int hi) {
        live("doca_verbs_qp_attr_set_" + field);
        DocaException.check(v >= lo && v <= hi, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_verbs_qp_attr_set_" + field + ": " + v + " out of range (" + lo + ".." + hi + ")");
    }

    void live(String w) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the QP attributes were destroyed");
    }
}
