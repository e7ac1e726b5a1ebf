package org.peerdirect.webconsole;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.iommu.IommuDomain;

/**
 * Reads the plotted counters once per second and hands each browser the rates: ODP faults served
 * and invalidations per device ({@code class/infiniband/<dev>/odp}), bytes moved (DMA read plus
 * written) per IOMMU domain, i.e. per PCI device.
 *
 * <p>Never blocks anyone: the sampler's own thread reads counters (each a lock-free read) and
 * offers one line to each subscriber's bounded queue; a full queue (a slow or vanished browser)
 * loses its oldest point, counted in {@link #dropped()}. Traffic and the shell never wait for a
 * browser, and a browser never waits for the sampler for longer than its poll.
 */
@Component(service = Sampler.class)
public final class Sampler {

    /** Points a browser may lag behind before its oldest are dropped. */
    static final int QUEUE = 120;
    /** Offered to every browser's queue when the sampler goes: its stream ends. */
    static final String END = "";
    /** Points a newly opened page gets at once (the last minutes). */
    static final int HISTORY = 300;

    private final ConsoleData data;
    private final ScheduledExecutorService timer;
    private final List<BlockingQueue<String>> subscribers = new CopyOnWriteArrayList<>();
    private final AtomicLong dropped = new AtomicLong();
    /** Last values and their time; only the sampler thread touches them. */
    private Map<String, Long> last = Map.of();
    private long lastNanos;
    /** The last {@link #HISTORY} points; guarded by itself. */
    private final ArrayDeque<String> history = new ArrayDeque<>();

    @Activate
    public Sampler(@Reference ConsoleData data) {
        this.data = data;
        this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "peerdirect-webconsole-sampler");
            t.setDaemon(true);
            return t;
        });
        timer.scheduleAtFixedRate(this::sample, 0, 1, TimeUnit.SECONDS);
    }

    private volatile boolean closed;

    /** Stops sampling and ends every browser's stream ({@link #END}), so no request thread outlives the bundle. */
    @Deactivate
    void deactivate() {
        closed = true;
        timer.shutdownNow();
        for (BlockingQueue<String> q : subscribers) {
            q.clear();
            q.offer(END);
        }
    }

    /** A browser's queue, with the history it missed; {@link #unsubscribe} it when the browser goes. */
    BlockingQueue<String> subscribe() {
        BlockingQueue<String> q = new ArrayBlockingQueue<>(QUEUE + HISTORY);
        if (closed) {
            q.offer(END);
            return q;
        }
        synchronized (history) {
            q.addAll(history);
        }
        subscribers.add(q);
        return q;
    }

    void unsubscribe(BlockingQueue<String> q) {
        subscribers.remove(q);
    }

    int subscribers() {
        return subscribers.size();
    }

    /** Points dropped because a browser did not take them in time. */
    long dropped() {
        return dropped.get();
    }

    /** The counters plotted, by series ("faults/mlx5_0", "invalidations/mlx5_0", "bytes/0000:05:00.0"). */
    Map<String, Long> counters() {
        Map<String, Long> c = new LinkedHashMap<>();
        for (String dev : data.odpDevices()) {
            String odp = ConsoleData.CLASS_INFINIBAND + "/" + dev + "/odp/";
            c.put("faults/" + dev, data.counter(odp + "page_faults"));
            c.put("invalidations/" + dev, data.counter(odp + "invalidations"));
        }
        for (IommuDomain d : data.domains()) {
            c.put("bytes/" + d.name(), d.bytesRead() + d.bytesWritten());
        }
        return c;
    }

    private void sample() {
        try {
            long now = System.nanoTime();
            Map<String, Long> cur = counters();
            if (lastNanos != 0) {
                publish(point(System.currentTimeMillis(), rates(cur, (now - lastNanos) / 1e9)));
            }
            last = cur;
            lastNanos = now;
        } catch (RuntimeException e) {
            // a device going away mid-read: that second has no point; the next sample reads afresh
        }
    }

    private Map<String, Double> rates(Map<String, Long> cur, double seconds) {
        Map<String, Double> r = new LinkedHashMap<>();
        cur.forEach((k, v) -> {
            Long before = last.get(k);
            // a new series, or a counter that restarted (a driver reloaded), starts at 0
            r.put(k, before == null || v < before ? 0.0 : (v - before) / seconds);
        });
        return r;
    }

    /** One point as JSON: {"t":millis,"dropped":n,"v":{"series":rate,...}}. */
    String point(long millis, Map<String, Double> rates) {
        StringBuilder sb = new StringBuilder("{\"t\":").append(millis).append(",\"dropped\":").append(dropped.get()).append(",\"v\":{");
        List<String> parts = new ArrayList<>();
        rates.forEach((k, v) -> parts.add("\"" + k.replace("\\", "\\\\").replace("\"", "\\\"") + "\":" + Math.round(v * 10) / 10.0));
        return sb.append(String.join(",", parts)).append("}}").toString();
    }

    /** Offers the point to every browser; never waits: a full queue loses its oldest point. */
    void publish(String point) {
        synchronized (history) {
            if (history.size() == HISTORY) {
                history.removeFirst();
            }
            history.addLast(point);
        }
        for (BlockingQueue<String> q : subscribers) {
            while (!q.offer(point)) {
                if (q.poll() != null) {
                    dropped.incrementAndGet();
                }
            }
        }
    }
}
