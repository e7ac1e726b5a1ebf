package org.peerdirect.launcher;

import java.math.BigDecimal;

/**
 * Shell commands of gogo.jline that a script leans on, in the {@code peerdirect} scope that the
 * session's {@code SCOPE} puts first. gogo.jline's {@code sleep} catches everything it throws and
 * prints it: Ctrl-C of {@code sleep 600} in a {@code -c} run printed
 * "sleep: java.lang.InterruptedException: sleep interrupted" under the launcher's own line. This
 * one ends with an exception in words, which the launcher (or the prompt) reports once. And the
 * default handler, which words an unknown command.
 *
 * <p>Public with public methods: Gogo calls commands reflectively.
 */
public final class ShellCommands {

    static final String[] FUNCTIONS = {"sleep", "default"};
    /** A day: a longer wait in a script is a typo. */
    private static final BigDecimal MAX_SECONDS = BigDecimal.valueOf(86_400);

    /** The interrupt of a waiting command, as one line ({@code toString()} is what the prompt prints). */
    static final class Interrupted extends InterruptedException {
        private static final long serialVersionUID = 1L;

        Interrupted(String message) {
            super(message);
        }

        @Override
        public String toString() {
            return getMessage();
        }
    }

    /** An unknown command, in the words a {@code -c} run prints ({@code toString()}: the prompt's line). */
    static final class UnknownCommand extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        UnknownCommand(String name) {
            super(Errors.unknownCommand(name));
        }

        @Override
        public String toString() {
            return getMessage();
        }
    }

    /**
     * Gogo's default command handler ({@code default} is a Java keyword, hence the underscore Gogo
     * looks for): called with the name and arguments of a command no scope has. It only words the
     * failure: the prompt printed "org.apache.felix.gogo.runtime.CommandNotFoundException: Command
     * not found: frobnicate".
     */
    public Object _default(Object... nameAndArgs) {
        throw new UnknownCommand(nameAndArgs == null || nameAndArgs.length == 0 ? "" : String.valueOf(nameAndArgs[0]));
    }

    /** {@code sleep <seconds>}: waits; decimals allowed ({@code sleep 0.5}); Ctrl-C ends it. */
    public void sleep(String... args) throws InterruptedException {
        if (args == null || args.length != 1) {
            throw new IllegalArgumentException("sleep: expected the seconds to wait, for example sleep 2 or sleep 0.5; got "
                    + (args == null ? 0 : args.length) + " arguments");
        }
        BigDecimal seconds;
        try {
            seconds = new BigDecimal(args[0]);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("sleep: expected the seconds to wait (a number), got '" + args[0] + "'");
        }
        if (seconds.signum() < 0 || seconds.compareTo(MAX_SECONDS) > 0) {
            throw new IllegalArgumentException("sleep: the seconds must be from 0 to " + MAX_SECONDS + ", got " + args[0]);
        }
        try {
            Thread.sleep(seconds.movePointRight(3).longValue());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Interrupted("sleep: interrupted");
        }
    }
}
