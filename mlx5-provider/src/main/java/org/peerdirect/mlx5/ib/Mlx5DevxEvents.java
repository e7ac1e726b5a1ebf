package org.peerdirect.mlx5.ib;

import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * DevX event channels of one user context ({@code devx_async_event_file} with
 * {@code MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT}): a channel is a queue the process reads like an fd
 * ({@link #read}, with a timeout; EIO once the context closed); a subscription names an object of
 * the context and the event types wanted, with the cookie each event carries back. The driver
 * delivers an object's event ({@link #deliver}) to every channel subscribed to it.
 *
 * <p>Lock rules: each channel's {@code lock} guards its queue and its closed flag, a leaf (the EQ
 * thread delivers holding nothing); subscriptions are a copy-on-write list.
 */
final class Mlx5DevxEvents {

    /** One event as read: the subscription's cookie, the event type, the object's type and id. */
    record Event(long cookie, int eventType, int objType, int objId) {
    }

    private record Subscription(int channel, int handle, int objType, int objId, int[] eventTypes, long cookie) {
        boolean wants(int type, int ot, int id) {
            if (ot != objType || id != objId) {
                return false;
            }
            for (int t : eventTypes) {
                if (t == type) {
                    return true;
                }
            }
            return false;
        }
    }

    private static final class Channel {
        final ReentrantLock lock = new ReentrantLock();
        final Condition arrived = lock.newCondition();
        final ArrayDeque<Event> queue = new ArrayDeque<>();
        boolean closed;
        /** Events dropped on a full queue (a channel holds at most {@link #DEPTH}). */
        long overflows;
    }

    static final int DEPTH = 1024;

    private final Mlx5Devx devx;
    private final Map<Integer, Channel> channels = new ConcurrentHashMap<>();
    private final List<Subscription> subscriptions = new CopyOnWriteArrayList<>();
    private final AtomicInteger next = new AtomicInteger(1);

    Mlx5DevxEvents(Mlx5Devx devx) {
        this.devx = devx;
    }

    /** {@code MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC}: a new channel's id. */
    int createChannel() {
        int id = next.getAndIncrement();
        channels.put(id, new Channel());
        return id;
    }

    private Channel channel(int id) {
        Channel c = channels.get(id);
        if (c == null) {
            throw new KernelException(Errno.EBADF, "DevX event channel " + id + " is not open in this context");
        }
        return c;
    }

    /** {@code MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT}: events of {@code types} on the object of {@code handle} go to {@code channel} with {@code cookie}. */
    void subscribe(int channel, int handle, int[] types, long cookie) {
        channel(channel);
        if (types.length == 0) {
            throw new KernelException(Errno.EINVAL, "DevX subscribe: no event type");
        }
        Mlx5Devx.Handle h = devx.object(handle);
        subscriptions.add(new Subscription(channel, handle, h.objType(), h.objId(), types.clone(), cookie));
    }

    /** The object's event: queued on every channel subscribed to it (dropped and counted on a full one). */
    void deliver(int eventType, int objType, int objId) {
        for (Subscription s : subscriptions) {
            if (!s.wants(eventType, objType, objId)) {
                continue;
            }
            Channel c = channels.get(s.channel());
            if (c == null) {
                continue;
            }
            c.lock.lock();
            try {
                if (c.closed) {
                    continue;
                }
                if (c.queue.size() >= DEPTH) {
                    c.overflows++;
                } else {
                    c.queue.add(new Event(s.cookie(), eventType, objType, objId));
                    c.arrived.signalAll();
                }
            } finally {
                c.lock.unlock();
            }
        }
    }

    /** {@code read} on the channel's fd: the next event, or null after {@code timeoutMs}; EIO once closed and empty. */
    Event read(int channel, long timeoutMs) throws InterruptedException {
        Channel c = channel(channel);
        long left = TimeUnit.MILLISECONDS.toNanos(Math.max(0, timeoutMs));
        c.lock.lock();
        try {
            while (c.queue.isEmpty()) {
                if (c.closed) {
                    throw new KernelException(Errno.EIO, "DevX event channel " + channel + ": the context is closed");
                }
                if (left <= 0) {
                    return null;
                }
                left = c.arrived.awaitNanos(left);
            }
            return c.queue.poll();
        } finally {
            c.lock.unlock();
        }
    }

    /** The channel's fd closed: its subscriptions go. */
    void destroyChannel(int channel) {
        Channel c = channel(channel);
        subscriptions.removeIf(s -> s.channel() == channel);
        channels.remove(channel);
        close(c);
    }

    private static void close(Channel c) {
        c.lock.lock();
        try {
            c.closed = true;
            c.arrived.signalAll();
        } finally {
            c.lock.unlock();
        }
    }

    /** An object went: its subscriptions with it. */
    void forget(Mlx5Devx.Handle h) {
        subscriptions.removeIf(s -> s.handle() == h.id());
    }

    /** The context closes: every channel ends (a reader wakes with EIO). */
    void close() {
        subscriptions.clear();
        for (Channel c : channels.values()) {
            close(c);
        }
    }
}
