package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_qp_open_attr}: what {@link IbvContext#openQp} opens, an existing XRC receive
 * QP by its number in an XRC domain this context has opened.
 *
 * @since 0.11
 */
public final class IbvQpOpenAttr {
    /** The domain the QP was created in (an opening of it by the calling context). */
    public IbvXrcd xrcd;
    /** The QP's number, as its creator learnt it from {@link IbvQp#qpNum()}. */
    public int qpNum;
    /** Only {@link IbvQpType#XRC_RECV} QPs are opened. */
    public IbvQpType qpType = IbvQpType.XRC_RECV;
}
