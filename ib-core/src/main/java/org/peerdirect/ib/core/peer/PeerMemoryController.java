package org.peerdirect.ib.core.peer;

import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.peerdirect.ib.core.umem.impl.PeerUmemGet;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.sysfs.Sysfs;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.peermem.PeerMemoryStatistics;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.ib.core.jfr.TracedPeerClient;
import org.peerdirect.ib.core.umem.PeerClaim;

/**
 * The peer-direct controller ({@code drivers/infiniband/core/peer_mem.c}, OFED 5.1+ design):
 * the client registry, brokering of ranges to clients, tickets, invalidation and statistics.
 *
 * <p>Lock rules. {@link #peerMemoryMutex} ({@code peer_memory_mutex}) guards {@link #clients}
 * and is held across every client's {@code acquire} while brokering, so a client removed from
 * the list under it is never asked again. Per-umem and per-client locks are described in
 * {@link PeerUmem} and {@link PeerClient}; the mutex is never taken while holding either.
 */
public final class PeerMemoryController implements PeerMemoryRegistry, PeerUmemGet {

    /** The seed's sysfs location ({@code /sys/kernel/infiniband/memory_peers/<name>/}). */
    public static final String SYSFS_DIR = "kernel/infiniband/memory_peers";
    /** JMX domain and type of the per-client MBeans. */
    public static final String MBEAN_PREFIX = "org.peerdirect:type=PeerMemoryClient,name=";

    private static final System.Logger LOG = System.getLogger("org.peerdirect.ib.core.peermem");
    private static final String[][] MANDATORY = {{"acquire", "acquire"}, {"getPages", "get_pages"},
            {"dmaMap", "dma_map"}, {"dmaUnmap", "dma_unmap"}, {"putPages", "put_pages"}};

    private final ReentrantLock peerMemoryMutex = new ReentrantLock();
    /** Registered clients in registration order; guarded by peerMemoryMutex. */
    private final List<PeerClient> clients = new ArrayList<>();
    /** Every client not yet fully unregistered (brokered or draining); guarded by peerMemoryMutex. */
    private final List<PeerClient> known = new ArrayList<>();
    private final Sysfs sysfs;
    private final MBeanServer mbeans;
    private volatile Duration unregisterLogInterval = Duration.ofSeconds(5);
    private volatile Consumer<String> warnSink = m -> LOG.log(System.Logger.Level.WARNING, m);
    private volatile boolean closed;

    /**
     * @param sysfs  where the statistics appear, or null for none
     * @param mbeans where the per-client MBeans are registered, or null for none
     */
    public PeerMemoryController(Sysfs sysfs, MBeanServer mbeans) {
        this.sysfs = sysfs;
        this.mbeans = mbeans;
    }

    /** The platform MBean server, for the OSGi component. */
    public static MBeanServer platformMBeanServer() {
        return ManagementFactory.getPlatformMBeanServer();
    }

    public void setUnregisterLogInterval(Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException("unregister log interval must be positive: " + d);
        }
        unregisterLogInterval = d;
    }

    Duration unregisterLogInterval() {
        return unregisterLogInterval;
    }

    /** Where warnings go (default: the System.Logger {@code org.peerdirect.ib.core.peermem}). */
    public void setWarnSink(Consumer<String> sink) {
        warnSink = Objects.requireNonNull(sink);
    }

    /** A warning through the sink (also used by this bundle's components). */
    public void warn(String message) {
        warnSink.accept(message);
    }

    // ---------------------------------------------------------------------------- registration

    @Override
    public PeerMemoryRegistration register(PeerMemoryClient client, boolean invalidation) {
        Objects.requireNonNull(client, "client");
        String name = client.name();
        String version = client.version();
        checkClient(client, name, version);
        // the core calls the client through TracedPeerClient: each callback is a JFR event when recorded
        PeerClient pc = new PeerClient(this, TracedPeerClient.of(client, name), name, version, invalidation);
        peerMemoryMutex.lock();
        try {
            if (closed) {
                throw new IllegalStateException("the IB core is stopping: peer memory client " + name + " cannot register");
            }
            for (PeerClient k : known) {
                if (k.name().equals(name)) {
                    throw new IllegalArgumentException("a peer memory client named " + name + " is already registered"
                            + (k.life == PeerClient.Life.DRAINING ? " (it is unregistering, waiting for its registrations)" : ""));
                }
            }
            createStatistics(pc);
            try {
                client.registered(pc);
            } catch (RuntimeException e) {
                removeStatistics(pc);
                throw new IllegalArgumentException("peer memory client " + name + ": registered() threw " + e, e);
            }
            known.add(pc);
            clients.add(pc);
        } finally {
            peerMemoryMutex.unlock();
        }
        return pc;
    }

    /** {@code ib_memory_peer_check_mandatory} plus the name and version limits. */
    private static void checkClient(PeerMemoryClient client, String name, String version) {
        if (name == null || name.isEmpty() || name.length() > PeerMemoryClient.NAME_MAX || name.contains("/")
                || name.equals(".") || name.equals("..") || !name.chars().allMatch(c -> c > ' ' && c < 127)) {
            throw new IllegalArgumentException("peer memory client name '" + name + "' is invalid: 1 to "
                    + PeerMemoryClient.NAME_MAX + " printable characters, no '/' or blanks (it names a sysfs directory)");
        }
        if (version == null || version.length() > PeerMemoryClient.VERSION_MAX) {
            throw new IllegalArgumentException("peer memory client " + name + ": version '" + version + "' is invalid: at most "
                    + PeerMemoryClient.VERSION_MAX + " characters");
        }
        int flags = client.flags();
        if ((flags & ~PeerMemoryClient.INVALIDATE_UNMAPS) != 0) {
            throw new IllegalArgumentException("peer memory client " + name + ": unknown flags 0x" + Integer.toHexString(flags));
        }
        for (String[] m : MANDATORY) {
            if (!implemented(client, m[0])) {
                throw new IllegalArgumentException("peer memory client " + name + ": missing mandatory function " + m[1]
                        + " (" + client.getClass().getName() + " does not implement PeerMemoryClient." + m[0] + ")");
            }
        }
    }

    /** A mandatory callback left at the interface's default stands for a NULL function pointer. */
    private static boolean implemented(PeerMemoryClient client, String method) {
        for (Method im : PeerMemoryClient.class.getMethods()) {
            if (im.getName().equals(method)) {
                try {
                    return client.getClass().getMethod(method, im.getParameterTypes()).getDeclaringClass() != PeerMemoryClient.class;
                } catch (NoSuchMethodException e) {
                    return false;
                }
            }
        }
        throw new AssertionError(method);
    }

    /** The client leaves brokering ({@code list_del} under the mutex). Idempotent. */
    void removeFromBrokering(PeerClient pc) {
        peerMemoryMutex.lock();
        try {
            clients.remove(pc);
            if (pc.life == PeerClient.Life.REGISTERED) {
                pc.life = PeerClient.Life.DRAINING;
            }
        } finally {
            peerMemoryMutex.unlock();
        }
    }

    /** After the last use: the statistics go away with the client. */
    void finishUnregister(PeerClient pc) {
        removeStatistics(pc);
        peerMemoryMutex.lock();
        try {
            known.remove(pc);
        } finally {
            peerMemoryMutex.unlock();
        }
    }

    /** Registered clients in brokering order. */
    public List<PeerMemoryRegistration> clients() {
        peerMemoryMutex.lock();
        try {
            return List.copyOf(clients);
        } finally {
            peerMemoryMutex.unlock();
        }
    }

    /** Every client not yet fully unregistered, including those draining. */
    public List<PeerMemoryRegistration> knownClients() {
        peerMemoryMutex.lock();
        try {
            return List.copyOf(known);
        } finally {
            peerMemoryMutex.unlock();
        }
    }

    /** The live umems of a client (for commands and tests). */
    public List<String> umemsOf(PeerMemoryRegistration r) {
        return ((PeerClient) r).users.stream().map(Object::toString).sorted().toList();
    }

    // ---------------------------------------------------------------------------- brokering

    private record Claim(PeerClient client, Object context) {
    }

    /** {@code ib_get_peer_client}: the first client, in order, whose acquire claims the range. */
    private Claim getPeerClient(int pid, long addr, long size, int peerMemFlags) {
        peerMemoryMutex.lock();
        try {
            for (PeerClient pc : clients) {
                if (pc.invalidationRequired && (peerMemFlags & org.peerdirect.ib.core.umem.UmemService.IB_PEER_MEM_INVAL_SUPP) == 0) {
                    continue;
                }
                Object ctx;
                try {
                    ctx = pc.ops.acquire(pid, addr, size);
                } catch (RuntimeException | Error e) {
                    if (e instanceof VirtualMachineError v) {
                        throw v;
                    }
                    warn("peer memory client " + pc.name() + ": acquire(0x" + Long.toHexString(addr) + ", " + size
                            + ") threw " + e + "; treated as not mine");
                    continue;
                }
                if (ctx != null) {
                    pc.get();
                    return new Claim(pc, ctx);
                }
            }
            return null;
        } finally {
            peerMemoryMutex.unlock();
        }
    }

    /**
     * {@link org.peerdirect.ib.core.umem.UmemService#peerClaims}: {@link #getPeerClient}'s loop
     * asking every client. Under the peer memory mutex, as the registration asks: no client
     * unregisters between its {@code acquire} and the {@code release} that follows a claim, so
     * no use count is taken.
     */
    @Override
    public List<PeerClaim> peerClaims(int pid, long addr, long size, int peerMemFlags) {
        List<PeerClaim> out = new java.util.ArrayList<>();
        peerMemoryMutex.lock();
        try {
            for (PeerClient pc : clients) {
                if (pc.invalidationRequired && (peerMemFlags & org.peerdirect.ib.core.umem.UmemService.IB_PEER_MEM_INVAL_SUPP) == 0) {
                    out.add(new PeerClaim(pc.name(), PeerClaim.Answer.SKIPPED,
                            "requires invalidation, and the caller does not support it (no IB_PEER_MEM_INVAL_SUPP)"));
                    continue;
                }
                Object ctx;
                try {
                    ctx = pc.ops.acquire(pid, addr, size);
                } catch (RuntimeException e) {
                    out.add(new PeerClaim(pc.name(), PeerClaim.Answer.FAILED, String.valueOf(e.getMessage() != null ? e.getMessage() : e)));
                    continue;
                }
                if (ctx == null) {
                    out.add(new PeerClaim(pc.name(), PeerClaim.Answer.NOT_MINE, ""));
                    continue;
                }
                try {
                    pc.ops.release(ctx);
                } catch (RuntimeException e) {
                    warn("peer memory client " + pc.name() + ": release threw " + e);
                }
                out.add(new PeerClaim(pc.name(), PeerClaim.Answer.CLAIMED, ""));
            }
            return out;
        } finally {
            peerMemoryMutex.unlock();
        }
    }

    /**
     * {@code ib_peer_umem_get}: builds a peer umem, or rethrows {@code pinError} when no client
     * claims the range. For an invalidating client the umem is returned with its mapping lock
     * held (the fence) until the driver activates the notifier or stops/releases the umem. The
     * memlock charge was taken by the caller and is returned by the umem's release.
     */
    @Override
    public PeerUmem peerUmemGetAndLock(AddressSpace mm, DmaDevice device, long addr, long length, boolean writable,
            int peerMemFlags, KernelException pinError) {
        Claim claim = getPeerClient(mm.pid(), addr, length, peerMemFlags);
        if (claim == null) {
            throw pinError;
        }
        PeerClient pc = claim.client();
        PeerMemoryClient ops = pc.ops;
        PeerUmem u = new PeerUmem(pc, claim.context(), mm, device, addr, length, writable);
        u.lockFence();
        try {
            if (pc.invalidationRequired) {
                u.xaId = pc.xaAllocCyclic(u);
            }
            try {
                // write is always requested to break CoW; force for read-only registrations
                ops.getPages(addr, length, true, !writable, claim.context(), u.xaId);
            } catch (RuntimeException e) {
                throw clientError(pc, "get_pages", e);
            }
            SgTable sg;
            try {
                try {
                    sg = ops.dmaMap(claim.context(), device);
                } catch (RuntimeException e) {
                    throw clientError(pc, "dma_map", e);
                }
                if (sg == null) {
                    throw new KernelException(Errno.EFAULT, "peer memory client " + pc.name() + ": dma_map returned no table");
                }
            } catch (RuntimeException e) {
                putPagesQuietly(pc, SgTable.EMPTY, claim.context());
                throw e;
            }
            u.sg = sg;
            try {
                u.setBlocksFromPeer(sg, ops.getPageSize(claim.context()));
            } catch (RuntimeException e) {
                pc.unmap(u); // dma_unmap + put_pages of what the client mapped
                u.sg = SgTable.EMPTY;
                throw e instanceof KernelException ke ? ke
                        : new KernelException(Errno.EINVAL, "peer memory client " + pc.name() + ": " + e.getMessage());
            }
            u.mapped();
            pc.users.add(u);
            if (u.xaId == PeerMemoryRegistry.NO_INVALIDATION_ID) {
                u.unlockFence();
            }
            return u;
        } catch (RuntimeException | Error e) {
            // err_xa: drop the ticket; err_umem: unlock; err_client: release() and the use count
            if (u.xaId != PeerMemoryRegistry.NO_INVALIDATION_ID) {
                pc.xaErase(u.xaId);
            }
            u.unlockFence();
            pc.put(claim.context());
            throw e;
        }
    }

    private void putPagesQuietly(PeerClient pc, SgTable sg, Object ctx) {
        try {
            pc.ops.putPages(sg, ctx);
        } catch (RuntimeException e) {
            warn("peer memory client " + pc.name() + ": put_pages threw " + e);
        }
    }

    private static KernelException clientError(PeerClient pc, String op, RuntimeException e) {
        if (e instanceof KernelException ke) {
            return new KernelException(ke.errno(), "peer memory client " + pc.name() + ": " + op + " failed: " + stripErrno(ke));
        }
        KernelException k = new KernelException(Errno.EFAULT, "peer memory client " + pc.name() + ": " + op + " failed: " + e);
        k.initCause(e);
        return k;
    }

    private static String stripErrno(KernelException ke) {
        String m = ke.getMessage();
        String prefix = ke.errno() + ": ";
        return m.startsWith(prefix) ? m.substring(prefix.length()) : m;
    }

    // ---------------------------------------------------------------------------- statistics

    private String dir(PeerClient pc) {
        return SYSFS_DIR + "/" + pc.name();
    }

    private void createStatistics(PeerClient pc) {
        if (sysfs != null) {
            String d = dir(pc);
            if (sysfs.exists(d)) {
                throw new IllegalArgumentException("sysfs " + d + " already exists");
            }
            sysfs.attribute(d + "/version", () -> pc.version);
            sysfs.attribute(d + "/num_alloc_mrs", () -> Long.toString(pc.numAllocMrs.get()));
            sysfs.attribute(d + "/num_dealloc_mrs", () -> Long.toString(pc.numDeallocMrs.get()));
            sysfs.attribute(d + "/num_reg_pages", () -> Long.toString(pc.numRegPages.get()));
            sysfs.attribute(d + "/num_dereg_pages", () -> Long.toString(pc.numDeregPages.get()));
            sysfs.attribute(d + "/num_reg_bytes", () -> Long.toString(pc.numRegBytes.get()));
            sysfs.attribute(d + "/num_dereg_bytes", () -> Long.toString(pc.numDeregBytes.get()));
            sysfs.attribute(d + "/num_free_callbacks", () -> Long.toString(pc.statistics().numFreeCallbacks()));
        }
        if (mbeans != null) {
            try {
                mbeans.registerMBean(new PeerClientStats(pc), objectName(pc.name()));
            } catch (Exception e) {
                warn("peer memory client " + pc.name() + ": no JMX MBean: " + e);
            }
        }
    }

    private void removeStatistics(PeerClient pc) {
        if (sysfs != null) {
            sysfs.remove(dir(pc));
            if (sysfs.list(SYSFS_DIR).isEmpty()) {
                sysfs.remove(SYSFS_DIR); // memory_peers goes with the last client
            }
        }
        if (mbeans != null) {
            try {
                ObjectName on = objectName(pc.name());
                if (mbeans.isRegistered(on)) {
                    mbeans.unregisterMBean(on);
                }
            } catch (Exception e) {
                warn("peer memory client " + pc.name() + ": MBean unregistration failed: " + e);
            }
        }
    }

    public static ObjectName objectName(String clientName) {
        try {
            return new ObjectName(MBEAN_PREFIX + ObjectName.quote(clientName));
        } catch (javax.management.MalformedObjectNameException e) {
            throw new IllegalArgumentException(e);
        }
    }

    /** The JMX view of one client: the sysfs files as attributes. */
    public interface PeerMemoryClientMXBean {
        String getVersion();
        long getNumAllocMrs();
        long getNumDeallocMrs();
        long getNumRegPages();
        long getNumDeregPages();
        long getNumRegBytes();
        long getNumDeregBytes();
        long getNumFreeCallbacks();
        boolean isInvalidationRequired();
        int getLiveRegistrations();
    }

    private record PeerClientStats(PeerClient pc) implements PeerMemoryClientMXBean {
        private PeerMemoryStatistics s() {
            return pc.statistics();
        }
        public String getVersion() {
            return pc.version;
        }
        public long getNumAllocMrs() {
            return s().numAllocMrs();
        }
        public long getNumDeallocMrs() {
            return s().numDeallocMrs();
        }
        public long getNumRegPages() {
            return s().numRegPages();
        }
        public long getNumDeregPages() {
            return s().numDeregPages();
        }
        public long getNumRegBytes() {
            return s().numRegBytes();
        }
        public long getNumDeregBytes() {
            return s().numDeregBytes();
        }
        public long getNumFreeCallbacks() {
            return s().numFreeCallbacks();
        }
        public boolean isInvalidationRequired() {
            return pc.invalidationRequired;
        }
        public int getLiveRegistrations() {
            return pc.users.size();
        }
    }

    // ---------------------------------------------------------------------------- shutdown

    /**
     * The IB core is going away (its bundle stops): no new registrations; umems whose driver armed
     * the notifier are revoked at once (driver function, then unmap); the others get
     * {@code grace} to be released by their drivers and are then unmapped anyway, loudly. Then
     * every client is unregistered. Never waits without bound. Idempotent.
     */
    public void close(Duration grace) {
        List<PeerClient> all;
        peerMemoryMutex.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            all = List.copyOf(known);
            clients.clear();
        } finally {
            peerMemoryMutex.unlock();
        }
        for (PeerClient pc : all) {
            for (PeerUmem u : List.copyOf(pc.users)) {
                if (u.armed()) {
                    u.revokeForShutdown();
                }
            }
        }
        long deadline = System.nanoTime() + grace.toNanos();
        for (PeerClient pc : all) {
            boolean done;
            try {
                done = pc.unregister(Duration.ofNanos(Math.max(0, deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                done = false;
            }
            // a registration that claimed the client just before the close may join the users
            // later: revoke until none is left (no new claim can start, the list is empty)
            while (!done) {
                for (PeerUmem u : List.copyOf(pc.users)) {
                    if (u.revokeForShutdown()) {
                        warn("IB core stopping: " + u + " was not released by its driver within " + grace + "; unmapped it anyway");
                    }
                }
                try {
                    done = pc.unregister(Duration.ofMillis(100));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    public boolean closed() {
        return closed;
    }
}
