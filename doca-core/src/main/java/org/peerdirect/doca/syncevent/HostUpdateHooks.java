package org.peerdirect.doca.syncevent;

import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;

/** The hooks registered on one {@link DocaSyncEvent}; copy-on-write: told without a lock, on the caller's thread. */
final class HostUpdateHooks {

    private final CopyOnWriteArrayList<HostUpdateHook> hooks = new CopyOnWriteArrayList<>();

    void add(HostUpdateHook h) {
        hooks.add(Objects.requireNonNull(h, "hook"));
    }

    void remove(HostUpdateHook h) {
        hooks.remove(h);
    }

    void updated(DocaSyncEvent e) {
        for (HostUpdateHook h : hooks) {
            h.updated(e);
        }
    }

    void releasing(DocaSyncEvent e) {
        for (HostUpdateHook h : hooks) {
            h.releasing(e);
        }
    }
}
