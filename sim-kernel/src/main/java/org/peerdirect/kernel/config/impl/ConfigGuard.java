package org.peerdirect.kernel.config.impl;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Dictionary;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.ConfigurationPlugin;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.osgi.service.metatype.AttributeDefinition;
import org.osgi.service.metatype.MetaTypeInformation;
import org.osgi.service.metatype.MetaTypeService;
import org.osgi.service.metatype.ObjectClassDefinition;

/**
 * Checks every configuration of a peerdirect component against its OSGi Metatype description
 * before Configuration Admin hands it over. A value outside its range (or of the wrong type, or
 * not one of its options) is rejected: an error naming the PID, the property, the value and what
 * is allowed goes to the log and to the console, the property keeps its last good value (its
 * default if it never had one), and {@code peerdirect:config} shows the rejection. Before this,
 * {@code memory.size = -1} made the memory manager vanish without a word and every command that
 * needed it failed later with a NullPointerException.
 *
 * <p>A plugin ({@code config.plugin.callbackorder} 0, the range where plugins may modify) sees the
 * properties each time a configuration is delivered, whatever changed it: {@code cm:} commands,
 * a management agent, files.
 *
 * <p>Lock: {@code this} guards {@link #lastGood} and {@link #rejections}.
 */
@Component(service = {ConfigurationPlugin.class, ConfigGuard.class},
        property = ConfigurationPlugin.CM_RANKING + ":Integer=0")
public final class ConfigGuard implements ConfigurationPlugin {

    /** One rejected value. */
    public record Rejection(Instant at, String pid, String property, String value, String reason, String kept) {
        @Override
        public String toString() {
            return String.format("%s %s: %s = %s rejected: %s; keeping %s", at, pid, property, value, reason, kept);
        }
    }

    static final String PREFIX = "org.peerdirect.";
    private static final int KEEP_REJECTIONS = 100;

    private final BundleContext context;
    private final MetaTypeService metatype;
    private final Logger log;
    private final Map<String, Map<String, Object>> lastGood = new HashMap<>();
    private final List<Rejection> rejections = new ArrayList<>();

    @Activate
    public ConfigGuard(BundleContext context, @Reference MetaTypeService metatype,
            @Reference(service = LoggerFactory.class) Logger log) {
        this.context = context;
        this.metatype = metatype;
        this.log = log;
    }

    @Override
    public void modifyConfiguration(ServiceReference<?> reference, Dictionary<String, Object> properties) {
        Object pidProp = properties.get("service.pid");
        if (!(pidProp instanceof String pid) || !pid.startsWith(PREFIX)) {
            return;
        }
        ObjectClassDefinition ocd = definitions().get(pid);
        if (ocd == null) {
            return; // no metatype: nothing to check against
        }
        synchronized (this) {
            Map<String, Object> good = lastGood.computeIfAbsent(pid, k -> new HashMap<>());
            for (AttributeDefinition ad : ocd.getAttributeDefinitions(ObjectClassDefinition.ALL)) {
                Object value = properties.get(ad.getID());
                if (value == null) {
                    continue;
                }
                String problem = problem(ad, value);
                if (problem == null) {
                    good.put(ad.getID(), value);
                    continue;
                }
                Object kept = good.get(ad.getID());
                if (kept != null) {
                    properties.put(ad.getID(), kept);
                } else {
                    properties.remove(ad.getID()); // the component's default applies
                }
                String keptText = kept != null ? String.valueOf(kept) : defaultOf(ad) + " (the default)";
                Rejection r = new Rejection(Instant.now(), pid, ad.getID(), String.valueOf(value), problem, keptText);
                if (rejections.size() == KEEP_REJECTIONS) {
                    rejections.remove(0);
                }
                rejections.add(r);
                log.error("configuration {}: {} = {} rejected: {}; keeping {}", pid, ad.getID(), value, problem, keptText);
                System.err.println("peerdirect: configuration " + pid + ": " + ad.getID() + " = " + value
                        + " rejected: " + problem + "; keeping " + keptText);
            }
        }
    }

    /** Why the value is not allowed, or null if it is. */
    static String problem(AttributeDefinition ad, Object value) {
        if (value.getClass().isArray() || value instanceof java.util.Collection<?>) {
            return "a single value is expected";
        }
        String text = String.valueOf(value);
        String v = ad.validate(text);
        if (v == null || v.isEmpty()) {
            return null;
        }
        return v + " (" + allowed(ad) + ": " + ad.getDescription() + ")";
    }

    /** What the attribute allows, in words: its options, or its type and the description's range. */
    static String allowed(AttributeDefinition ad) {
        String[] options = ad.getOptionValues();
        if (options != null && options.length > 0) {
            return "one of " + String.join(", ", options);
        }
        return switch (ad.getType()) {
            case AttributeDefinition.LONG, AttributeDefinition.INTEGER, AttributeDefinition.SHORT -> "an integer";
            case AttributeDefinition.BOOLEAN -> "true or false";
            case AttributeDefinition.DOUBLE, AttributeDefinition.FLOAT -> "a number";
            default -> "text";
        };
    }

    static String defaultOf(AttributeDefinition ad) {
        String[] d = ad.getDefaultValue();
        return d == null || d.length == 0 ? "(none)" : String.join(",", d);
    }

    /** Every peerdirect PID with a Metatype description, with its definition. */
    Map<String, ObjectClassDefinition> definitions() {
        Map<String, ObjectClassDefinition> out = new java.util.TreeMap<>();
        for (Bundle b : context.getBundles()) {
            if (b.getSymbolicName() == null || !b.getSymbolicName().startsWith(PREFIX)) {
                continue;
            }
            MetaTypeInformation info = metatype.getMetaTypeInformation(b);
            if (info != null) {
                for (String p : info.getPids()) {
                    out.put(p, info.getObjectClassDefinition(p, null));
                }
            }
        }
        return out;
    }

    synchronized List<Rejection> rejections() {
        return List.copyOf(rejections);
    }

    static Map<String, Object> toMap(Dictionary<String, Object> d) {
        Map<String, Object> m = new HashMap<>();
        if (d != null) {
            for (Enumeration<String> e = d.keys(); e.hasMoreElements();) {
                String k = e.nextElement();
                m.put(k, d.get(k));
            }
        }
        return m;
    }
}
