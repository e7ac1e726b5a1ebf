package org.peerdirect.kernel.shell.impl;

import java.lang.reflect.InvocationTargetException;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Component;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code peerdirect:fails <text> <statement...>}: runs a statement that must fail, and fails
 * itself unless it did with a message containing {@code text}. A script (the demo, a user's
 * check) shows a refusal this way and goes on, where the failing statement alone would end the
 * script; a statement that succeeds, or fails for another reason, still ends it.
 */
@Component(service = ExpectCommands.class, property = {"osgi.command.scope=peerdirect", "osgi.command.function=fails"})
public final class ExpectCommands {

    @Descriptor("runs a statement that must fail with a message containing the text; prints the message. Example: peerdirect:fails EBUSY kernel:rmmod nvidia_peermem")
    public String fails(CommandSession session, @Descriptor("text the failure's message must contain") String expected,
            @Descriptor("the statement") String... statement) throws Exception {
        if (statement.length == 0) {
            throw new UsageException("peerdirect:fails: expected the text and then the statement that must fail, got only '" + expected + "'");
        }
        String cmd = String.join(" ", statement);
        try {
            session.execute(cmd);
        } catch (Exception e) {
            String m = message(e);
            if (m.contains(expected)) {
                return "failed as expected: " + m;
            }
            throw new IllegalStateException("peerdirect:fails: '" + cmd + "' failed, but not with '" + expected + "': " + m, e);
        }
        throw new IllegalStateException("peerdirect:fails: '" + cmd + "' succeeded; it should have failed with '" + expected + "'");
    }

    /** The message of the failure itself, below reflection's wrapping. */
    private static String message(Throwable e) {
        Throwable t = e;
        while ((t instanceof InvocationTargetException || t.getMessage() == null) && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getMessage() == null ? t.getClass().getName() : t.getMessage();
    }
}
