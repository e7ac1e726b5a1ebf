package org.peerdirect.doca.syncevent;

/**
 * A host-side observer of a {@link DocaSyncEvent}'s counter ({@link DocaSyncEvent#addHostUpdateHook})
 * [model: peerdirect's; DOCA does not publish how its DPA kernel dispatcher learns of a host
 * update]. DOCA DPA's launch dispatcher registers one per event a launch in flight waits on.
 */
public interface HostUpdateHook {

    /** After a host {@code updateSet} or {@code updateAdd}, the new value in the counter, on the updating thread. */
    void updated(DocaSyncEvent event);

    /** At {@code stop} or {@code destroy} of a started event, before its counter goes: the last moment anyone may read it. */
    default void releasing(DocaSyncEvent event) {
    }
}
