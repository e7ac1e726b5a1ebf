package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArraySet;

import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * The sync events with a DPA location on a {@link DocaDpa} context, as DOCA Core's hooks
 * ({@code DocaDpaContext}) reach them: their 8-byte counters in the process heap, and the events
 * attached and not destroyed, for {@link DocaDpaObjects}.
 *
 * <p>Lock: a counter is read and written through the context's heap calls (each takes its lock);
 * the set of events is copy-on-write and needs none.
 */
final class DpaSyncEvents {

    private final DocaDpa dpa;
    private final Set<DocaSyncEvent> events = new CopyOnWriteArraySet<>();

    DpaSyncEvents(DocaDpa dpa) {
        this.dpa = dpa;
    }

    /**
     * A counter: a zeroed cell of the heap (a block of its own, 64-byte aligned), the counter and
     * its watch word ({@code DocaDpaDevSyncEvent.COUNTER_CELL}: the kernel dispatcher on the DPA
     * sets it while a queued launch waits on the event, so a DPA update activates it).
     */
    long counterAlloc() {
        long d = dpa.memAlloc(DocaDpaDevSyncEvent.COUNTER_CELL);
        dpa.memset(d, 0, DocaDpaDevSyncEvent.COUNTER_CELL);
        return d;
    }

    long counterGet(long daddr) {
        return ByteBuffer.wrap(dpa.d2hMemcpy(daddr, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    void counterSet(long daddr, long value) {
        dpa.h2dMemcpy(daddr, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(value).array());
    }

    void attached(DocaSyncEvent event) {
        events.add(event);
    }

    void detached(DocaSyncEvent event) {
        events.remove(event);
    }

    /** Each event with its value read now; call without the context's lock held or with it (reentrant). */
    List<DocaDpaObjects.Event> snapshot() {
        List<DocaDpaObjects.Event> evs = new ArrayList<>();
        for (DocaSyncEvent e : events) {
            evs.add(new DocaDpaObjects.Event(e.toString(), value(e)));
        }
        return evs;
    }

    private static String value(DocaSyncEvent e) {
        try {
            return Long.toUnsignedString(e.get());
        } catch (DocaException x) { // not started, or its DPA memory went with a stopped context
            return "- (" + x.error().getName() + ")";
        }
    }
}
