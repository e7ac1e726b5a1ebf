package org.peerdirect.launcher;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.util.tracker.ServiceTracker;
import org.osgi.util.tracker.ServiceTrackerCustomizer;

/**
 * What the launcher adds to every Gogo command processor (the runtime bundle may come and go, so
 * it is tracked), installed before any shell exists:
 * <ul>
 * <li><b>Wrong arguments in words</b>, for every peerdirect command at once: each command function
 * of a project bundle (and the launcher's own) gets a wrapper in the processor, ranked above
 * the runtime's own proxy, that calls the command as the proxy does and turns Gogo's "Cannot
 * coerce spawn() to any of [(String)]" into the command's usage ({@link CommandUsage}). The
 * answer is the exception itself, so the interactive prompt, {@code try { } { }} and
 * {@code -c} runs all show it.</li>
 * <li><b>Every session kept reachable</b> until its processor goes. Gogo's
 * {@code CommandProcessorImpl.stop()} copies its WeakHashMap of sessions with
 * {@code keySet().toArray(new CommandSession[size()])}; a session the collector cleared between
 * {@code size()} and the copy leaves a null slot, and stop() throws a NullPointerException
 * ("session" is null) while the container stops: the shell's profile session is garbage once
 * the non-interactive profile ran. A session that ran a statement stays strongly held here, so
 * none is cleared while the processor lives.</li>
 * <li><b>Failures in words</b>: whatever else a project command throws reaches the shell as
 * {@link Errors.Worded}, the message {@code -c} runs print, so the prompt shows the same line.</li>
 * </ul>
 * The Gogo types live in the runtime bundle, not on the launcher's class path: they are loaded
 * from it and implemented with proxies, as {@link GogoSession} does.
 */
final class GogoHooks {

    private static final String LISTENER = "org.apache.felix.service.command.CommandSessionListener";
    private static final String COMMANDS = "(&(osgi.command.scope=*)(osgi.command.function=*))";

    private final BundleContext ctx;
    private final ServiceTracker<Object, Hooked> processors;

    private GogoHooks(BundleContext ctx) {
        this.ctx = ctx;
        this.processors = new ServiceTracker<>(ctx, GogoSession.PROCESSOR, new ServiceTrackerCustomizer<Object, Hooked>() {
            @Override
            public Hooked addingService(ServiceReference<Object> ref) {
                Object processor = ctx.getService(ref);
                try {
                    return processor == null ? null : new Hooked(processor, ref.getBundle());
                } catch (ReflectiveOperationException | InvalidSyntaxException e) {
                    System.err.println("peerdirect: cannot hook the Gogo command processor: " + e);
                    return null;
                }
            }

            @Override
            public void modifiedService(ServiceReference<Object> ref, Hooked hooked) {
                // nothing: the processor is the same object
            }

            @Override
            public void removedService(ServiceReference<Object> ref, Hooked hooked) {
                hooked.close();
                ctx.ungetService(ref);
            }
        });
    }

    /** Hooks every command processor from now on (the runtime bundle need not be started yet). */
    static GogoHooks install(BundleContext ctx) {
        GogoHooks hooks = new GogoHooks(ctx);
        hooks.processors.open(true); // the launcher cannot see the runtime's package: track every registration
        return hooks;
    }

    /** The commands a user sees in words: the project's bundles and the launcher's own (bundle 0). */
    static boolean isProject(Bundle b) {
        return b != null && (b.getBundleId() == 0
                || (b.getSymbolicName() != null && b.getSymbolicName().startsWith("org.peerdirect.")));
    }

    /**
     * A {@code CommandSessionListener} ({@code listenerType}, from the runtime bundle) that adds
     * every session running a statement to {@code sessions}, see the class comment.
     */
    static Object sessionKeeper(Class<?> listenerType, Set<Object> sessions) {
        return Proxy.newProxyInstance(listenerType.getClassLoader(), new Class<?>[] {listenerType},
                (proxy, method, args) -> switch (method.getName()) {
                    case "beforeExecute" -> {
                        sessions.add(args[0]);
                        yield null;
                    }
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == args[0];
                    case "toString" -> "peerdirect session keeper";
                    default -> null;
                });
    }

    /** One processor with its session keeper and its command wrappers. */
    private final class Hooked {
        private final Object processor;
        private final Object keeper;
        private final Class<?> listenerType;
        /** Gogo's {@code CommandProxy}, loaded from the runtime bundle. */
        private final Class<?> proxyType;
        private final Method addCommand;
        private final Method removeCommand;
        /** Sessions that ran a statement: strong references, see the class comment. */
        private final Set<Object> sessions = ConcurrentHashMap.newKeySet();
        private final ServiceTracker<Object, List<Wrapper>> commands;

        Hooked(Object processor, Bundle runtime) throws ReflectiveOperationException, InvalidSyntaxException {
            this.processor = processor;
            this.listenerType = runtime.loadClass(LISTENER);
            this.proxyType = runtime.loadClass(WordingProxy.COMMAND_PROXY);
            this.addCommand = processor.getClass().getMethod("addCommand", String.class, Object.class, String.class, int.class);
            this.removeCommand = processor.getClass().getMethod("removeCommand", String.class, String.class, Object.class);
            this.keeper = sessionKeeper(listenerType, sessions);
            processor.getClass().getMethod("addListener", listenerType).invoke(processor, keeper);
            this.commands = new ServiceTracker<>(ctx, ctx.createFilter(COMMANDS), new ServiceTrackerCustomizer<Object, List<Wrapper>>() {
                @Override
                public List<Wrapper> addingService(ServiceReference<Object> ref) {
                    return isProject(ref.getBundle()) ? wrap(ref) : null;
                }

                @Override
                public void modifiedService(ServiceReference<Object> ref, List<Wrapper> wrappers) {
                    // the functions are read once, as the runtime's own tracker does
                }

                @Override
                public void removedService(ServiceReference<Object> ref, List<Wrapper> wrappers) {
                    for (Wrapper w : wrappers) {
                        invokeQuietly(removeCommand, w.scope, w.function, w.proxy);
                    }
                }
            });
            commands.open(true);
        }

        private List<Wrapper> wrap(ServiceReference<Object> ref) {
            String scope = String.valueOf(ref.getProperty("osgi.command.scope"));
            Object f = ref.getProperty("osgi.command.function");
            List<String> functions = new ArrayList<>();
            if (f instanceof String[] names) {
                functions.addAll(List.of(names));
            } else if (f != null) {
                functions.add(String.valueOf(f));
            }
            List<Wrapper> wrappers = new ArrayList<>();
            for (String function : functions) {
                try {
                    Wrapper w = new Wrapper(ref, scope, function);
                    // above the runtime's own proxy (ranked by service.ranking): the processor picks the highest
                    invokeQuietly(addCommand, scope, w.proxy, function, Integer.MAX_VALUE);
                    wrappers.add(w);
                } catch (ReflectiveOperationException | RuntimeException e) {
                    // the command keeps Gogo's own proxy and wording
                    System.err.println("peerdirect: cannot wrap " + scope + ":" + function + ": " + Errors.unwrap(e));
                }
            }
            return wrappers;
        }

        private void invokeQuietly(Method m, Object... args) {
            try {
                m.invoke(processor, args);
            } catch (ReflectiveOperationException e) {
                System.err.println("peerdirect: Gogo refused " + m.getName() + ": " + Errors.unwrap(e));
            }
        }

        void close() {
            commands.close();
            try {
                processor.getClass().getMethod("removeListener", listenerType).invoke(processor, keeper);
            } catch (ReflectiveOperationException e) {
                // the runtime is going: its listeners go with it
            }
            sessions.clear();
        }

        /**
         * One command function: a {@code CommandProxy} of Gogo's own (gogo.jline's {@code help}
         * introspects only those), whose {@code execute} words a wrong argument list.
         */
        private final class Wrapper {
            final String scope;
            final String function;
            final Object proxy;
            /** The name the user knows: the launcher's commands without their scope (install, refresh ...). */
            private final String shown;

            Wrapper(ServiceReference<Object> ref, String scope, String function) throws ReflectiveOperationException {
                this.scope = scope;
                this.function = function;
                this.shown = ref.getBundle() != null && ref.getBundle().getBundleId() == 0 ? function : scope + ":" + function;
                this.proxy = WordingProxy.create(proxyType, ctx, ref, function, (p, m, args) -> execute(p, args[0], args[1]));
            }

            private Object execute(Object self, Object session, Object arguments) throws Throwable {
                List<?> args = List.copyOf(((List<?>) arguments).stream().map(a -> a == null ? "null" : a).toList());
                try {
                    return WordingProxy.superExecute(self, session, arguments);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (CommandUsage.isGogoCoercion(cause, function)) {
                        throw new CommandUsage.WrongArguments(CommandUsage.wrongArguments(shown,
                                CommandUsage.forms(WordingProxy.targetType(self), function), args, !shown.equals(function)), cause);
                    }
                    if (cause instanceof Exception ex && !(cause instanceof CommandUsage.WrongArguments) && !(cause instanceof Errors.Worded)) {
                        throw new Errors.Worded(Errors.message(ex), ex); // the prompt shows the words, not the class
                    }
                    throw cause;
                }
            }
        }
    }
}
