package org.peerdirect.ib.core.uverbs;

import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvEventType;

/**
 * {@code ib_uverbs_qp_event_handler} / {@code ib_uverbs_srq_event_handler}: the handler the core
 * gives the driver with a new QP or SRQ; an event goes to the owning context's queue with the
 * object. The object is bound right after the driver created it (it cannot raise events before:
 * a new QP is in RESET, a new SRQ unarmed); an event before that, or of another kind of object,
 * is dropped.
 */
final class UEvents implements IbEvents {

    private final UContext ctx;
    private final IbvEventType.Element kind;
    private volatile Object element;

    UEvents(UContext ctx, IbvEventType.Element kind) {
        this.ctx = ctx;
        this.kind = kind;
    }

    void bind(Object element) {
        this.element = element;
    }

    @Override
    public void event(IbvEventType type) {
        Object o = element;
        if (o != null && type != null && type.element() == kind) {
            ctx.asyncEvent(IbvAsyncEvent.of(type, o));
        }
    }
}
