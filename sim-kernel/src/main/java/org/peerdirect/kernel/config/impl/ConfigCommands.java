package org.peerdirect.kernel.config.impl;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.metatype.AttributeDefinition;
import org.osgi.service.metatype.ObjectClassDefinition;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code peerdirect:config}: every peerdirect configuration with each property's value, where it
 * comes from (set, or the default), what is allowed and what it means; then the values the
 * {@link ConfigGuard} rejected. Set values with Felix's {@code cm:} commands or any management agent.
 */
@Component(service = ConfigCommands.class, property = {"osgi.command.scope=peerdirect", "osgi.command.function=config"})
public final class ConfigCommands {

    private final ConfigGuard guard;
    private final ConfigurationAdmin cm;

    /** SCR's runtime view, when present: lets {@link #config} return once the component runs with the new value. */
    private volatile org.osgi.service.component.runtime.ServiceComponentRuntime scr;

    @Reference(cardinality = org.osgi.service.component.annotations.ReferenceCardinality.OPTIONAL,
            policy = org.osgi.service.component.annotations.ReferencePolicy.DYNAMIC,
            policyOption = org.osgi.service.component.annotations.ReferencePolicyOption.GREEDY, unbind = "unsetScr")
    void setScr(org.osgi.service.component.runtime.ServiceComponentRuntime s) {
        scr = s;
    }

    void unsetScr(org.osgi.service.component.runtime.ServiceComponentRuntime s) {
        if (scr == s) {
            scr = null;
        }
    }

    /** How long {@link #config} waits for the component to be re-created with the value. */
    private static final long APPLY_WAIT_NS = 10_000_000_000L;

    private final org.osgi.framework.BundleContext context;

    @Activate
    public ConfigCommands(org.osgi.framework.BundleContext context, @Reference ConfigGuard guard, @Reference ConfigurationAdmin cm) {
        this.context = context;
        this.guard = guard;
        this.cm = cm;
    }

    /** The highest service id registered now: services registered later have higher ids. */
    private long lastServiceId() {
        long max = -1;
        try {
            org.osgi.framework.ServiceReference<?>[] all = context.getAllServiceReferences(null, null);
            for (org.osgi.framework.ServiceReference<?> r : all == null ? new org.osgi.framework.ServiceReference<?>[0] : all) {
                max = Math.max(max, (Long) r.getProperty(org.osgi.framework.Constants.SERVICE_ID));
            }
        } catch (org.osgi.framework.InvalidSyntaxException cannot) {
            throw new IllegalStateException(cannot);
        }
        return max;
    }

    @Descriptor("every peerdirect configuration: values, defaults, allowed ranges, and rejected values")
    public String config() throws IOException, org.osgi.framework.InvalidSyntaxException {
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, ObjectClassDefinition> e : guard.definitions().entrySet()) {
            String pid = e.getKey();
            Configuration[] set = cm.listConfigurations("(service.pid=" + pid + ")");
            Map<String, Object> values = ConfigGuard.toMap(set == null ? null : set[0].getProperties());
            out.add(pid + "  (" + e.getValue().getName() + ")");
            for (AttributeDefinition ad : e.getValue().getAttributeDefinitions(ObjectClassDefinition.ALL)) {
                Object v = values.get(ad.getID());
                out.add(String.format("  %-28s %-14s %-9s %s", ad.getID(), v != null ? v : ConfigGuard.defaultOf(ad),
                        v != null ? "(set)" : "(default)", ad.getDescription()));
            }
        }
        List<ConfigGuard.Rejection> rejected = guard.rejections();
        out.add(rejected.isEmpty() ? "no rejected values" : "rejected values (newest last):");
        for (ConfigGuard.Rejection r : rejected) {
            out.add("  " + r);
        }
        return String.join("\n", out);
    }

    @Descriptor("sets one property of a peerdirect configuration (checked first; returns once the component runs with it: re-created, or changed in place). Example: peerdirect:config org.peerdirect.hca.cx3 devices 3")
    public String config(@Descriptor("configuration PID (peerdirect:config lists them)") String pid,
            @Descriptor("property name") String property, @Descriptor("new value (sizes take K/M/G)") String value)
            throws IOException {
        ObjectClassDefinition ocd = guard.definitions().get(pid);
        if (ocd == null) {
            throw new UsageException("peerdirect:config: no peerdirect configuration '" + pid + "' (peerdirect:config lists them)");
        }
        AttributeDefinition ad = null;
        for (AttributeDefinition a : ocd.getAttributeDefinitions(ObjectClassDefinition.ALL)) {
            if (a.getID().equals(property)) {
                ad = a;
            }
        }
        if (ad == null) {
            throw new UsageException("peerdirect:config: " + pid + " has no property '" + property + "' (peerdirect:config lists them)");
        }
        Object typed = switch (ad.getType()) {
            case AttributeDefinition.LONG -> Args.size("peerdirect:config", property, value, Long.MIN_VALUE, Long.MAX_VALUE);
            case AttributeDefinition.INTEGER -> (int) Args.integer("peerdirect:config", property, value, Integer.MIN_VALUE, Integer.MAX_VALUE);
            case AttributeDefinition.BOOLEAN -> Boolean.valueOf(Args.oneOf("peerdirect:config", property, value, "true", "false"));
            default -> value;
        };
        String problem = ConfigGuard.problem(ad, typed);
        if (problem != null) {
            throw new UsageException("peerdirect:config: " + pid + ": " + property + " = " + value + " rejected: " + problem);
        }
        long servicesBefore = lastServiceId();
        java.util.List<Consumer> consumers = consumersOf(pid); // who uses the component's services now
        Configuration c = cm.getConfiguration(pid, "?");
        java.util.Dictionary<String, Object> props = c.getProperties() == null ? new java.util.Hashtable<>() : c.getProperties();
        props.put(property, typed);
        c.update(props);
        if (ad.getDescription() != null && ad.getDescription().endsWith(AT_NEXT_START)) {
            return pid + ": " + property + " = " + typed + " (stored; " + AT_NEXT_START + " of the component: stop and start its bundle)";
        }
        if (scr == null) {
            return pid + ": " + property + " = " + typed + " (Configuration Admin delivers it to the component now)";
        }
        // Configuration Admin and SCR apply the change on their own threads and announce nothing a
        // caller can wait on: watch SCR's runtime view (bounded) so the next command sees the
        // re-created component, not the old one
        long deadline = System.nanoTime() + APPLY_WAIT_NS;
        while (!applied(pid, property, typed, servicesBefore) || !rebound(consumers, servicesBefore)) {
            if (System.nanoTime() - deadline > 0) {
                return pid + ": " + property + " = " + typed + " (stored; no component runs with it after 10 s: see scr:list)";
            }
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
        }
        return pid + ": " + property + " = " + typed + " (applied: the component runs with it)";
    }

    /** A component configuration ({@code id}) whose reference {@code reference} is bound to a service of interest. */
    private record Consumer(long id, String reference) {
    }

    /** The component configurations whose references are bound now to a service of a component configured by {@code pid}. */
    private java.util.List<Consumer> consumersOf(String pid) {
        java.util.List<Consumer> out = new java.util.ArrayList<>();
        org.osgi.service.component.runtime.ServiceComponentRuntime r = scr;
        if (r != null) {
            java.util.Set<String> names = new java.util.HashSet<>();
            for (org.osgi.service.component.runtime.dto.ComponentDescriptionDTO d : r.getComponentDescriptionDTOs()) {
                // a component taking changes in place (@Modified) keeps its services: its users stay bound
                if (d.configurationPid != null && java.util.Arrays.asList(d.configurationPid).contains(pid) && d.modified == null) {
                    names.add(d.name);
                }
            }
            for (org.osgi.service.component.runtime.dto.ComponentDescriptionDTO d : r.getComponentDescriptionDTOs()) {
                for (org.osgi.service.component.runtime.dto.ComponentConfigurationDTO cc : r.getComponentConfigurationDTOs(d)) {
                    for (org.osgi.service.component.runtime.dto.SatisfiedReferenceDTO ref : cc.satisfiedReferences) {
                        for (org.osgi.framework.dto.ServiceReferenceDTO sr : ref.boundServices) {
                            if (names.contains(String.valueOf(sr.properties.get("component.name")))) {
                                out.add(new Consumer(cc.id, ref.name));
                            }
                        }
                    }
                }
            }
        }
        return out;
    }

    /**
     * Every consumer that was bound to the component's old services (and still runs) is bound now
     * to a service registered after {@code servicesBefore}: the re-created component is visible to
     * the commands that use it, not only registered (the framework delivers the registration to its
     * users after it is in the registry).
     */
    private boolean rebound(java.util.List<Consumer> consumers, long servicesBefore) {
        org.osgi.service.component.runtime.ServiceComponentRuntime r = scr;
        if (r == null || consumers.isEmpty()) {
            return true;
        }
        for (Consumer c : consumers) {
            long id = c.id();
            String refName = c.reference();
            boolean found = false; // the consumer still runs with that reference satisfied
            boolean bound = false;
            for (org.osgi.service.component.runtime.dto.ComponentDescriptionDTO d : r.getComponentDescriptionDTOs()) {
                for (org.osgi.service.component.runtime.dto.ComponentConfigurationDTO cc : r.getComponentConfigurationDTOs(d)) {
                    if (cc.id != id) {
                        continue;
                    }
                    for (org.osgi.service.component.runtime.dto.SatisfiedReferenceDTO ref : cc.satisfiedReferences) {
                        if (ref.name.equals(refName)) {
                            found = true;
                            for (org.osgi.framework.dto.ServiceReferenceDTO sr : ref.boundServices) {
                                bound |= sr.id > servicesBefore;
                            }
                        }
                    }
                }
            }
            if (found && !bound) {
                return false; // a running consumer has not seen the new service yet
            }
        }
        return true;
    }

    /**
     * Whether every component configured by {@code pid} runs (active; a delayed one satisfied) with
     * {@code property} = {@code value}. A component that publishes services must publish them
     * anew (a service id above {@code servicesBefore}) with the value: SCR's runtime view shows the
     * new properties on the old instance for a moment before it re-creates it, so the view alone
     * let a command through while the component was about to go away.
     */
    private boolean applied(String pid, String property, Object value, long servicesBefore) {
        org.osgi.service.component.runtime.ServiceComponentRuntime r = scr;
        if (r == null) {
            return true;
        }
        boolean any = false;
        for (org.osgi.service.component.runtime.dto.ComponentDescriptionDTO d : r.getComponentDescriptionDTOs()) {
            if (d.configurationPid == null || !java.util.Arrays.asList(d.configurationPid).contains(pid) || !r.isComponentEnabled(d)) {
                continue;
            }
            any = true;
            boolean running = false;
            for (org.osgi.service.component.runtime.dto.ComponentConfigurationDTO cc : r.getComponentConfigurationDTOs(d)) {
                // an immediate component is up once ACTIVE (its activation returned): SCR registers
                // its services before activating it, so SATISFIED with the new services let a command
                // in while its constructor was half-way (nv_mem registered, nv_mem_nc not yet:
                // LauncherIT caught it); a delayed one stays SATISFIED until someone uses it
                boolean up = cc.state == org.osgi.service.component.runtime.dto.ComponentConfigurationDTO.ACTIVE
                        || (!d.immediate && cc.state == org.osgi.service.component.runtime.dto.ComponentConfigurationDTO.SATISFIED);
                if (up && String.valueOf(value).equals(String.valueOf(cc.properties.get(property)))) {
                    running = true;
                }
            }
            // a component re-created publishes new services with the value; one taking the change in
            // place (@Modified) gets it on its services once its modified method returned
            long since = d.modified != null ? 0 : servicesBefore;
            if (!running || (d.serviceInterfaces != null && d.serviceInterfaces.length > 0 && !republished(d.name, property, value, since))) {
                return false;
            }
        }
        return any;
    }

    /** Descriptions of properties fixed while their component runs end with this (e.g. the memory size). */
    public static final String AT_NEXT_START = "applies at the next start";

    /** A service of component {@code name} registered after {@code servicesBefore} carries {@code property} = {@code value}. */
    private boolean republished(String name, String property, Object value, long servicesBefore) {
        try {
            org.osgi.framework.ServiceReference<?>[] refs = context.getAllServiceReferences(null,
                    "(&(component.name=" + name + ")(service.id>=" + (servicesBefore + 1) + "))");
            if (refs != null) {
                for (org.osgi.framework.ServiceReference<?> ref : refs) {
                    if (String.valueOf(value).equals(String.valueOf(ref.getProperty(property)))) {
                        return true;
                    }
                }
            }
            return false;
        } catch (org.osgi.framework.InvalidSyntaxException badName) {
            return true; // a name the filter cannot hold: the runtime view's answer stands
        }
    }
}
