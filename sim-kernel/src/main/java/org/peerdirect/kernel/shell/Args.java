package org.peerdirect.kernel.shell;

import java.util.Locale;

/**
 * Parses command arguments given as text. Commands take {@code String} parameters and call these,
 * so a wrong argument is reported by the command in words naming what it expected, what it got
 * and where, never as Gogo's "Cannot coerce" or a {@code NumberFormatException}.
 *
 * <p>Numbers accept decimal or {@code 0x} hex; sizes also a K, M, G or T suffix (powers of 1024).
 */
public final class Args {

    private Args() {
    }

    /** A process id: a positive integer. */
    public static int pid(String command, String text) {
        return (int) integer(command, "a process id", text, 1, Integer.MAX_VALUE);
    }

    /** The live process a command names: a usage error naming the command if the text or the pid is wrong. */
    public static org.peerdirect.kernel.mm.AddressSpace process(org.peerdirect.kernel.mm.Mm mm, String command, String text) {
        int p = pid(command, text);
        org.peerdirect.kernel.mm.AddressSpace as = mm.findProcess(p);
        if (as == null) {
            throw new UsageException(command + ": no process " + p + " (kernel:ps lists them)");
        }
        return as;
    }

    /** An integer in [min, max], decimal or 0x hex. */
    public static long integer(String command, String what, String text, long min, long max) {
        long v = parse(command, what, text, false);
        return inRange(command, what, text, v, min, max);
    }

    /** A user virtual address (decimal or 0x hex), non-negative. */
    public static long address(String command, String text) {
        return parse(command, "an address (0x hex or decimal)", text, false);
    }

    /** A byte count in [min, max], with an optional K/M/G/T suffix. */
    public static long size(String command, String what, String text, long min, long max) {
        long v = parse(command, what, text, true);
        return inRange(command, what, text, v, min, max);
    }

    private static long inRange(String command, String what, String text, long v, long min, long max) {
        if (v < min || v > max) {
            throw new UsageException(String.format("%s: %s must be %s, got %s", command, what, range(min, max), text));
        }
        return v;
    }

    private static String range(long min, long max) {
        if (max == Long.MAX_VALUE || max == Integer.MAX_VALUE) {
            return "at least " + min;
        }
        return "from " + min + " to " + max;
    }

    private static long parse(String command, String what, String text, boolean suffix) {
        if (text == null || text.isBlank()) {
            throw new UsageException(command + ": expected " + what + ", got nothing");
        }
        String t = text.trim().toLowerCase(Locale.ROOT).replace("_", "");
        long scale = 1;
        if (suffix && !t.startsWith("0x") && !t.isEmpty()) {
            int shift = switch (t.charAt(t.length() - 1)) {
                case 'k' -> 10;
                case 'm' -> 20;
                case 'g' -> 30;
                case 't' -> 40;
                default -> 0;
            };
            if (shift > 0) {
                t = t.substring(0, t.length() - 1);
                scale = 1L << shift;
            }
        }
        try {
            long v = t.startsWith("0x") ? Long.parseUnsignedLong(t.substring(2), 16) : Long.parseLong(t);
            if (v < 0 && t.startsWith("0x")) {
                throw new NumberFormatException("above 2^63");
            }
            return Math.multiplyExact(v, scale);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new UsageException(String.format("%s: expected %s (%s), got '%s'", command, what,
                    suffix ? "an integer, 0x hex, or with a K/M/G/T suffix" : "an integer or 0x hex", text));
        }
    }

    /** One of the words given; a usage error naming them otherwise. */
    public static String oneOf(String command, String what, String text, String... allowed) {
        for (String a : allowed) {
            if (a.equals(text)) {
                return a;
            }
        }
        throw new UsageException(String.format("%s: %s is one of %s, got '%s'", command, what, String.join(", ", allowed), text));
    }
}
