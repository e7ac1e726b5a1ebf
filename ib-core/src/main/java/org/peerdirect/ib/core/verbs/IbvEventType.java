package org.peerdirect.ib.core.verbs;

/**
 * {@code enum ibv_event_type}, same order; {@link #str()} is {@code ibv_event_type_str}. What an
 * event is about ({@link IbvAsyncEvent}): a CQ, a QP, an SRQ, a port, or the device.
 */
public enum IbvEventType {
    CQ_ERR("CQ error", Element.CQ),
    QP_FATAL("local work queue catastrophic error", Element.QP),
    QP_REQ_ERR("invalid request local work queue error", Element.QP),
    QP_ACCESS_ERR("local access violation work queue error", Element.QP),
    COMM_EST("communication established", Element.QP),
    SQ_DRAINED("send queue drained", Element.QP),
    PATH_MIG("path migrated", Element.QP),
    PATH_MIG_ERR("path migration request error", Element.QP),
    DEVICE_FATAL("local catastrophic error", Element.DEVICE),
    PORT_ACTIVE("port active", Element.PORT),
    PORT_ERR("port error", Element.PORT),
    LID_CHANGE("LID change", Element.PORT),
    PKEY_CHANGE("P_Key change", Element.PORT),
    SM_CHANGE("SM change", Element.PORT),
    SRQ_ERR("SRQ catastrophic error", Element.SRQ),
    SRQ_LIMIT_REACHED("SRQ limit reached", Element.SRQ),
    QP_LAST_WQE_REACHED("last WQE reached", Element.QP),
    CLIENT_REREGISTER("client reregistration", Element.PORT),
    GID_CHANGE("GID table change", Element.PORT),
    WQ_FATAL("WQ fatal", Element.WQ);

    /** What the event's {@code element} union holds. */
    public enum Element {
        CQ, QP, SRQ, WQ, PORT, DEVICE
    }

    private final String str;
    private final Element element;

    IbvEventType(String str, Element element) {
        this.str = str;
        this.element = element;
    }

    /** {@code ibv_event_type_str}. */
    public String str() {
        return str;
    }

    /** The member of {@code ibv_async_event.element} that is valid for this type. */
    public Element element() {
        return element;
    }
}
