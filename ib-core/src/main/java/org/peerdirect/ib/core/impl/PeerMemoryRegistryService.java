package org.peerdirect.ib.core.impl;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.kernel.sysfs.Sysfs;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryRegistry;

/**
 * The peer-memory registry service and the whiteboard: every {@link PeerMemoryClient} service
 * is registered on arrival (in arrival order, with invalidation when its
 * {@value PeerMemoryClient#INVALIDATION_PROPERTY} property is true) and unregistered on
 * departure; the departure waits, as {@code ib_unregister_peer_memory_client} does, until its
 * registrations are deregistered. When ib-core stops, live registrations are revoked instead
 * (see {@link PeerMemoryController#close}).
 *
 * <p>A change of a client's {@value PeerMemoryClient#INVALIDATION_PROPERTY} property while it is
 * registered (a component's {@code @Modified} taking a new configuration in place) changes its
 * flavour the only way the kernel can: the client is unregistered (leaving brokering at once; on
 * the registry's own thread the re-registration waits, as {@code rmmod} does, until its MRs are
 * deregistered, logging them) and registered again, last in brokering order, with the new
 * flavour. Keeping the old registration would be a silent wrong answer either way: a client
 * turned invalidating would free memory under MRs of callers that cannot be invalidated; one
 * turned non-invalidating would keep invalidating. (Refusing the change in place would leave
 * every other whiteboard client, whose properties the registry does not control, with the gap.)
 *
 * <p>Lock rules: {@code whiteboardLock} guards the whiteboard maps and is never held while
 * waiting for MRs; re-registrations run one at a time on the registry's thread.
 *
 * <p>Configuration ({@code org.peerdirect.ib.core.peermem}): {@code unregister.log.interval.ms}
 * (5000) and {@code close.grace.ms} (2000), both applied in place.
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = {PeerMemoryRegistry.class, PeerMemoryControllerService.class}, configurationPid = "org.peerdirect.ib.core.peermem")
@Designate(ocd = PeerMemoryRegistryService.Config.class)
public final class PeerMemoryRegistryService implements PeerMemoryRegistry, PeerMemoryControllerService {

    @ObjectClassDefinition(name = "IB core peer memory",
            description = "The peer-memory registry (ib_peer_mem): how it waits for clients going away")
    @interface Config {
        @AttributeDefinition(min = "10", max = "3600000",
                description = "milliseconds between log lines while an unregister waits for live MRs (10 to 3600000)")
        long unregister_log_interval_ms() default 5000;

        @AttributeDefinition(min = "0", max = "600000",
                description = "milliseconds a closing registry waits for in-flight registrations (0 to 600000)")
        long close_grace_ms() default 2000;
    }

    private final PeerMemoryController controller;
    /** Changed in place by {@link #modified}. */
    private volatile Duration grace;
    /** Guards {@link #whiteboard} and {@link #wanted}; never held while waiting for MRs. */
    private final Object whiteboardLock = new Object();
    /** Each whiteboard client's registration now (draining while a re-registration waits). */
    private final Map<PeerMemoryClient, PeerMemoryRegistration> whiteboard = new HashMap<>();
    /** The flavour each whiteboard client's service properties ask for now. */
    private final Map<PeerMemoryClient, Boolean> wanted = new HashMap<>();
    /** Re-registrations after a flavour change: one at a time, off the thread delivering the change. */
    private final ExecutorService reRegistrations = Executors.newSingleThreadExecutor(
            r -> Thread.ofPlatform().daemon().name("peer-memory-whiteboard").unstarted(r));

    @Activate
    public PeerMemoryRegistryService(@Reference Sysfs sysfs, Config c) {
        this(new PeerMemoryController(sysfs, PeerMemoryController.platformMBeanServer()), c);
    }

    /** Over a given controller (tests: a private MBean server and a warning sink). */
    PeerMemoryRegistryService(PeerMemoryController controller, Config c) {
        this.controller = controller;
        controller.setUnregisterLogInterval(Duration.ofMillis(c.unregister_log_interval_ms()));
        grace = Duration.ofMillis(c.close_grace_ms());
    }

    /**
     * Both values are timings: applied in place. Re-creating the registry for them (what a
     * component without a modified method gets, even for the guard putting back a rejected value)
     * revoked every live peer registration.
     */
    @Modified
    void modified(Config c) {
        controller.setUnregisterLogInterval(Duration.ofMillis(c.unregister_log_interval_ms()));
        grace = Duration.ofMillis(c.close_grace_ms());
    }

    @Override
    public PeerMemoryController controller() {
        return controller;
    }

    @Override
    public PeerMemoryRegistration register(PeerMemoryClient client, boolean invalidation) {
        return controller.register(client, invalidation);
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "removeClient", updated = "updatedClient")
    void addClient(PeerMemoryClient client, Map<String, Object> props) {
        synchronized (whiteboardLock) {
            wanted.put(client, invalidation(props));
            try {
                whiteboard.put(client, controller.register(client, invalidation(props)));
            } catch (RuntimeException e) {
                controller.warn("peer memory client service " + props.get("service.id") + " refused: " + e.getMessage());
            }
        }
    }

    /**
     * The client's service properties changed. Same flavour: nothing to do. Another flavour: the
     * client leaves brokering now (no new MR gets the old flavour) and, at once when no MR uses
     * it, else on the registry's thread once its MRs are deregistered, {@link #reRegister}
     * registers it again with the newest flavour asked for. Waiting here instead would hold the
     * thread delivering the change (Configuration Admin's: every other configuration would wait
     * for those MRs too). A client refused at arrival is tried again with its new properties.
     */
    void updatedClient(PeerMemoryClient client, Map<String, Object> props) {
        boolean invalidation = invalidation(props);
        PeerMemoryRegistration old;
        synchronized (whiteboardLock) {
            wanted.put(client, invalidation);
            old = whiteboard.get(client);
            if (old != null && old.invalidationRequired() == invalidation) {
                return; // unchanged, or changed back while a re-registration waits (it reads wanted)
            }
        }
        if (old == null) {
            addClient(client, props);
            return;
        }
        controller.warn("peer memory client " + old.name() + ": " + PeerMemoryClient.INVALIDATION_PROPERTY + " changed to "
                + invalidation + ": it leaves brokering now and registers again " + (invalidation ? "with" : "without")
                + " invalidation once its MRs are deregistered, as rmmod waits for them");
        boolean unused;
        try {
            unused = old.unregister(Duration.ZERO); // list_del now; true when no MR held it
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // a zero wait does not block; keep the flag for the caller
            unused = false;
        }
        if (unused) {
            reRegister(client, old); // nothing to wait for: the new flavour is in force when the delivery returns
        } else {
            reRegistrations.execute(() -> reRegister(client, old));
        }
    }

    /**
     * On the registry's thread: waits until {@code old}'s MRs are deregistered (logging them), then
     * registers {@code client} with the flavour its properties ask for now, unless its service
     * left meanwhile (then {@link #removeClient} took the entry, and nothing is registered again).
     */
    private void reRegister(PeerMemoryClient client, PeerMemoryRegistration old) {
        old.unregister(); // as ib_unregister_peer_memory_client: returns when no umem uses the client
        synchronized (whiteboardLock) {
            if (whiteboard.get(client) != old) {
                return; // the service left, or an earlier task already registered it again
            }
            boolean invalidation = wanted.getOrDefault(client, old.invalidationRequired());
            try {
                whiteboard.put(client, controller.register(client, invalidation));
                controller.warn("peer memory client " + old.name() + " registered again " + (invalidation ? "with" : "without") + " invalidation");
            } catch (RuntimeException e) {
                whiteboard.remove(client);
                controller.warn("peer memory client " + old.name() + " refused at its re-registration: " + e.getMessage());
            }
        }
    }

    void removeClient(PeerMemoryClient client) {
        PeerMemoryRegistration r;
        synchronized (whiteboardLock) {
            r = whiteboard.remove(client);
            wanted.remove(client);
        }
        if (r != null) {
            r.unregister(); // blocks until the client's registrations are deregistered
        }
    }

    /** {@value PeerMemoryClient#INVALIDATION_PROPERTY}: {@code Boolean.TRUE} or the string "true"; absent is false. */
    private static boolean invalidation(Map<String, Object> props) {
        Object v = props.get(PeerMemoryClient.INVALIDATION_PROPERTY);
        return Boolean.TRUE.equals(v) || "true".equals(v);
    }

    /**
     * The controller revokes every registration (a re-registration waiting for MRs then finds
     * the core closed and gives up), then the registry's thread ends.
     */
    @Deactivate
    void deactivate() {
        reRegistrations.shutdown();
        controller.close(grace);
        try {
            if (!reRegistrations.awaitTermination(grace.toMillis() + 5_000, TimeUnit.MILLISECONDS)) {
                controller.warn("IB core stopping: a peer-memory client re-registration did not end");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
