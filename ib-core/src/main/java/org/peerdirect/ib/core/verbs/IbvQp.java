package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_qp}. */
@ProviderType
public interface IbvQp {

    int qpNum();

    IbvQpType qpType();

    IbvQpState state();

    /**
     * {@code ibv_modify_qp}: only the transitions {@link IbvQpState#canMoveTo} allows, with the
     * attributes {@link IbvQpState#requiredMask} requires; EINVAL names what is wrong.
     */
    void modify(IbvQpAttr attr, int attrMask);

    /** {@code ibv_query_qp}: a copy of the current attributes. */
    IbvQpAttr query();

    /**
     * {@code ibv_post_send} of the chain starting at {@code wr}. A request the QP cannot take
     * (state before RTS, too many SGEs, inline data too long, queue full, opcode not valid for the
     * QP type) throws {@link PostException} naming it (the C {@code bad_wr}); the requests before
     * it were posted. On a QP in the error state requests complete with WR_FLUSH_ERR.
     */
    void postSend(IbvSendWr wr);

    /** {@code ibv_post_recv}; EINVAL in RESET, or with an SRQ attached. */
    void postRecv(IbvRecvWr wr);

    /**
     * {@code ibv_destroy_qp}. For an XRC receive QP this closes the caller's handle (its
     * creation's or an {@link IbvContext#openQp}'s); the QP itself goes with its last handle. Idempotent.
     */
    void destroy();
}
