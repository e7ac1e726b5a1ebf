package org.peerdirect.testkit;

import java.lang.reflect.Method;
import java.util.Map;
import java.util.TreeMap;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.InvocationInterceptor;
import org.junit.jupiter.api.extension.ReflectiveInvocationContext;

/**
 * A contract runner's list of the contract tests its provider is known to fail, each with the
 * cause found (register it with {@code @RegisterExtension}). A listed test must STILL FAIL: it
 * runs, its failure is expected and swallowed, and a listed test that passes fails ("fixed:
 * take it off the list"), so the list only shrinks (as arch's HouseRulesTest {@code KNOWN}). A
 * name that is no test of the class fails too, so a renamed test cannot hide.
 *
 * @since 0.6
 */
public final class KnownDifferences implements InvocationInterceptor {

    private final Map<String, String> known;

    /** Test method name to the cause found. */
    public KnownDifferences(Map<String, String> known) {
        this.known = new TreeMap<>(known);
    }

    public Map<String, String> known() {
        return known;
    }

    @Override
    public void interceptTestMethod(Invocation<Void> invocation, ReflectiveInvocationContext<Method> call, ExtensionContext ctx)
            throws Throwable {
        checkNamesExist(ctx.getRequiredTestClass());
        String name = call.getExecutable().getName();
        String cause = known.get(name);
        if (cause == null) {
            invocation.proceed();
            return;
        }
        try {
            invocation.proceed();
        } catch (org.opentest4j.TestAbortedException skipped) {
            throw skipped; // an assumption not met: neither a pass nor a failure
        } catch (Throwable expected) {
            ctx.publishReportEntry("known difference", name + ": " + cause + " (still fails: " + expected + ")");
            return;
        }
        throw new AssertionError(name + " is on the known-differences list (" + cause + ") but passes now: fixed, take it off the list");
    }

    private void checkNamesExist(Class<?> test) {
        for (String name : known.keySet()) {
            boolean found = false;
            for (Class<?> c = test; c != null && !found; c = c.getSuperclass()) {
                for (Method m : c.getDeclaredMethods()) {
                    found |= m.getName().equals(name) && m.isAnnotationPresent(org.junit.jupiter.api.Test.class);
                }
            }
            if (!found) {
                throw new AssertionError("known difference " + name + " names no test of " + test.getName());
            }
        }
    }
}
