package org.peerdirect.hca.wire;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The port's neighbour table for IPv4 ({@code neigh} of the kernel, what rxe's
 * {@code rxe_prepare} finds through the route): IP to MAC, learnt from every ARP packet naming
 * a sender and from ARP replies. A lookup that misses sends an ARP request; the packet that
 * needed it is lost, and the transport's retransmission finds the entry (as a real NIC's
 * first packet to a new peer waits in the neighbour queue, or, when nobody answers, the QP ends
 * in RETRY_EXC_ERR after its retries).
 */
public final class Neighbours {

    private final ConcurrentHashMap<Integer, Long> byIp = new ConcurrentHashMap<>();

    /** The entry found last: a port talks to few peers, so the packet path finds it here without boxing. */
    private record Entry(int ip, long mac) {
    }

    private volatile Entry last;

    /** The MAC for {@code ip}, or -1 when unknown. */
    public long lookup(int ip) {
        Entry e = last;
        if (e != null && e.ip == ip) {
            return e.mac;
        }
        Long m = byIp.get(ip);
        if (m == null) {
            return -1;
        }
        last = new Entry(ip, m);
        return m;
    }

    public void learn(int ip, long mac) {
        if (ip != 0 && mac != RxeNet.BROADCAST && mac != 0) {
            Long was = byIp.put(ip, mac);
            Entry e = last;
            if (e != null && e.ip == ip && e.mac != mac) {
                last = null; // moved to another MAC
            }
            if (was == null) {
                synchronized (this) {
                    notifyAll();
                }
            }
        }
    }

    /**
     * The MAC for {@code ip}, waiting at most {@code nanos} for an ARP reply to bring it (as a QP
     * moving to RTR waits for its path's resolution); -1 when none came.
     */
    public long await(int ip, long nanos) {
        long deadline = System.nanoTime() + nanos;
        synchronized (this) {
            long m;
            while ((m = lookup(ip)) < 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return -1;
                }
                try {
                    wait(Math.max(1, left / 1_000_000), 0);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return -1;
                }
            }
            return m;
        }
    }

    public int size() {
        return byIp.size();
    }

    /** {@code ip lladdr mac} lines, as {@code ip neigh} prints them. */
    public String describe() {
        StringBuilder b = new StringBuilder();
        byIp.forEach((ip, mac) -> b.append(RxeNet.ipString(ip)).append(" lladdr ").append(RxeNet.macString(mac)).append('\n'));
        return b.toString();
    }
}
