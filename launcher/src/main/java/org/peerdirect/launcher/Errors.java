package org.peerdirect.launcher;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a failed statement tells the user: one line in words, never a stack trace unless
 * {@code -v} ({@code peerdirect.verbose}) asks for it. Gogo's own failures are put in words here
 * because they happen before any project command runs: an argument list no method of the command
 * takes ("Cannot coerce maps(Token) to any of [(int)]") and an unknown command.
 */
final class Errors {

    /** {@code Cannot coerce maps(Token, Token) to any of [(int), (int, String)]}. */
    private static final Pattern COERCE = Pattern.compile("Cannot coerce (\\S+?)\\((.*?)\\) to any of \\[(.*)]");

    private Errors() {
    }

    /**
     * A project command's failure in the words {@link #message} gives it, its {@code toString()}
     * the message alone: the interactive prompt prints a failed statement with {@code toString()},
     * which put the exception's class before every message
     * ("org.peerdirect.kernel.shell.UsageException: kernel:maps: no process 99999"). The
     * command's own exception is the cause.
     */
    static final class Worded extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        Worded(String message, Throwable cause) {
            super(message, cause);
        }

        @Override
        public String toString() {
            return getMessage();
        }
    }

    static String message(Throwable e) {
        Throwable t = unwrap(e);
        String m = t.getMessage();
        if (t.getClass().getSimpleName().equals("CommandNotFoundException")) {
            return unknownCommand(m.replaceFirst("^Command not found: ", ""));
        }
        if (m != null) {
            Matcher c = COERCE.matcher(m);
            if (c.find()) {
                String args = c.group(2).isBlank() ? "no arguments" : countArgs(c.group(2)) + " argument(s)";
                return c.group(1) + ": these arguments fit no form of the command (got " + args
                        + "; it takes " + c.group(3).replace("(", "<").replace(")", ">")
                        + "); see 'help " + c.group(1) + "'";
            }
        }
        if (m == null || m.isBlank()) {
            return t.getClass().getSimpleName();
        }
        // our exceptions carry the errno or the command name in the message already
        if (t instanceof IllegalArgumentException || t instanceof IllegalStateException
                || t.getClass().getName().startsWith("org.peerdirect.")) {
            return m;
        }
        return t.getClass().getSimpleName() + ": " + m;
    }

    static String unknownCommand(String name) {
        return "unknown command '" + name + "' (help lists the commands; Tab completes them)";
    }

    private static int countArgs(String list) {
        return list.split(",").length;
    }

    static Throwable unwrap(Throwable e) {
        Throwable t = e;
        while ((t instanceof java.lang.reflect.InvocationTargetException
                || t instanceof java.lang.reflect.UndeclaredThrowableException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static boolean verbose() {
        return Boolean.getBoolean("peerdirect.verbose");
    }
}
