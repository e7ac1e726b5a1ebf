package org.peerdirect.rdma.tools;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** The tools' option parsing: {@code -s 4096 -n 1000 -c -d mlx4_0 --mem host}; unknown options are errors. */
final class Options {

    private final Map<String, String> values = new HashMap<>();
    private final String tool;

    Options(String tool, Object[] args, Set<String> withValue, Set<String> flags) {
        this.tool = tool;
        for (int i = 0; i < args.length; i++) {
            String a = String.valueOf(args[i]);
            if (withValue.contains(a)) {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(tool + ": option " + a + " needs a value");
                }
                values.put(a, String.valueOf(args[++i]));
            } else if (flags.contains(a)) {
                values.put(a, "true");
            } else {
                throw new IllegalArgumentException(tool + ": unknown option '" + a + "' (options: " + withValue + " with a value, "
                        + flags + ")");
            }
        }
    }

    boolean flag(String f) {
        return values.containsKey(f);
    }

    String string(String o, String def) {
        return values.getOrDefault(o, def);
    }

    long number(String o, long def, long min, long max) {
        String v = values.get(o);
        if (v == null) {
            return def;
        }
        long n;
        try {
            n = Long.decode(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(tool + ": " + o + " '" + v + "' is not a number");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(tool + ": " + o + " " + n + " is not in " + min + ".." + max);
        }
        return n;
    }
}
