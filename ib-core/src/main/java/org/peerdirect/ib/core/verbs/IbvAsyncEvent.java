package org.peerdirect.ib.core.verbs;

import java.util.Objects;

/**
 * {@code struct ibv_async_event}: an event the device raised, as {@code ibv_get_async_event}
 * returns it. Exactly the element its type names ({@link IbvEventType#element()}) is set: the
 * CQ, QP or SRQ (the object itself, which stays valid to look at after it is destroyed), or the
 * port number; none for {@link IbvEventType#DEVICE_FATAL}.
 */
public final class IbvAsyncEvent {

    private final IbvEventType type;
    private final Object object;
    private final int portNum;

    private IbvAsyncEvent(IbvEventType type, Object object, int portNum) {
        this.type = Objects.requireNonNull(type, "type");
        this.object = object;
        this.portNum = portNum;
    }

    /** An event affiliated with a CQ, QP or SRQ ({@code object} of the type's element). */
    public static IbvAsyncEvent of(IbvEventType type, Object object) {
        IbvEventType.Element e = type.element();
        boolean ok = switch (e) {
            case CQ -> object instanceof IbvCq;
            case QP -> object instanceof IbvQp;
            case SRQ -> object instanceof IbvSrq;
            default -> false;
        };
        if (!ok) {
            throw new IllegalArgumentException(type + " is about a " + e + ", not " + object);
        }
        return new IbvAsyncEvent(type, object, 0);
    }

    /** An event of a port (numbered from 1). */
    public static IbvAsyncEvent ofPort(IbvEventType type, int portNum) {
        if (type.element() != IbvEventType.Element.PORT || portNum < 1) {
            throw new IllegalArgumentException(type + " is not a port event of port " + portNum);
        }
        return new IbvAsyncEvent(type, null, portNum);
    }

    /** {@link IbvEventType#DEVICE_FATAL}. */
    public static IbvAsyncEvent deviceFatal() {
        return new IbvAsyncEvent(IbvEventType.DEVICE_FATAL, null, 0);
    }

    public IbvEventType type() {
        return type;
    }

    /** {@code element.cq}, or null. */
    public IbvCq cq() {
        return object instanceof IbvCq c ? c : null;
    }

    /** {@code element.qp}, or null. */
    public IbvQp qp() {
        return object instanceof IbvQp q ? q : null;
    }

    /** {@code element.srq}, or null. */
    public IbvSrq srq() {
        return object instanceof IbvSrq s ? s : null;
    }

    /** {@code element.port_num}, or 0. */
    public int portNum() {
        return portNum;
    }

    /** As {@code ibv_asyncwatch} prints it: the type's string and its element. */
    @Override
    public String toString() {
        String what = switch (type.element()) {
            case QP -> String.format("QP 0x%x", qp().qpNum());
            case PORT -> "port " + portNum;
            case DEVICE -> "device";
            default -> String.valueOf(object);
        };
        return type + " (" + type.str() + ") on " + what;
    }
}
