package org.peerdirect.ib.core.impl;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

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
 * flavour the only way the kernel can: the client is unregistered (leaving brokering at once, the
 * change waiting, as {@code rmmod} does, until its MRs are deregistered, logging them) and
 * registered again, last in brokering order, with the new flavour. Keeping the old registration
 * would be a silent wrong answer either way: a client turned invalidating would free memory under
 * MRs of callers that cannot be invalidated; one turned non-invalidating would keep invalidating.
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
    private final Map<PeerMemoryClient, PeerMemoryRegistration> whiteboard = new ConcurrentHashMap<>();

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
        try {
            whiteboard.put(client, controller.register(client, invalidation(props)));
        } catch (RuntimeException e) {
            controller.warn("peer memory client service " + props.get("service.id") + " refused: " + e.getMessage());
        }
    }

    /**
     * The client's service properties changed. Same flavour: nothing to do. Another flavour:
     * unregister (blocking until its MRs are deregistered; the wait is logged with their names)
     * and register again. A client refused at arrival is tried again with its new properties.
     * The framework delivers one service's events in order; a departure during the wait finds
     * the old registration draining and the re-registration is undone (see the end).
     */
    void updatedClient(PeerMemoryClient client, Map<String, Object> props) {
        boolean invalidation = invalidation(props);
        PeerMemoryRegistration old = whiteboard.get(client);
        if (old == null) {
            addClient(client, props);
            return;
        }
        if (old.invalidationRequired() == invalidation) {
            return;
        }
        controller.warn("peer memory client " + old.name() + ": " + PeerMemoryClient.INVALIDATION_PROPERTY + " changed to "
                + invalidation + ": unregistering it (waiting for its MRs) and registering it again "
                + (invalidation ? "with" : "without") + " invalidation");
        old.unregister(); // blocks until the client's registrations are deregistered, as rmmod does
        PeerMemoryRegistration now;
        try {
            now = controller.register(client, invalidation);
        } catch (RuntimeException e) {
            whiteboard.remove(client, old);
            controller.warn("peer memory client service " + props.get("service.id") + " refused at its re-registration: " + e.getMessage());
            return;
        }
        if (!whiteboard.replace(client, old, now)) {
            now.unregister(); // the service left while we waited: nothing uses the fresh registration yet
            return;
        }
        controller.warn("peer memory client " + now.name() + " registered again " + (invalidation ? "with" : "without") + " invalidation");
    }

    void removeClient(PeerMemoryClient client) {
        PeerMemoryRegistration r = whiteboard.remove(client);
        if (r != null) {
            r.unregister(); // blocks until the client's registrations are deregistered
        }
    }

    /** {@value PeerMemoryClient#INVALIDATION_PROPERTY}: {@code Boolean.TRUE} or the string "true"; absent is false. */
    private static boolean invalidation(Map<String, Object> props) {
        Object v = props.get(PeerMemoryClient.INVALIDATION_PROPERTY);
        return Boolean.TRUE.equals(v) || "true".equals(v);
    }

    @Deactivate
    void deactivate() {
        controller.close(grace);
    }
}
