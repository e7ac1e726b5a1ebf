package org.peerdirect.doca.syncevent;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * Told which sync events name it as their publisher or subscriber location: a DPA context that
 * lists its live objects ({@code dpa:doca}) implements it beside {@code DocaDpaContext}; a
 * context without it is told nothing. Nothing else depends on it.
 */
@ConsumerType
public interface SyncEventAttachments {

    /** {@code event} named this context as its publisher or subscriber location. */
    void syncEventAttached(DocaSyncEvent event);

    /** {@code event}, attached before, was destroyed. */
    void syncEventDetached(DocaSyncEvent event);
}
