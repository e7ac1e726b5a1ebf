package org.peerdirect.rdma.tools;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The tools' option parsing: {@code -s 4096 -n 1000 -c -d mlx4_0 --mem host}. Each tool declares
 * its options once ({@link Opt}: name, argument, description, default); that one table gives the
 * parsing (a long option's value also as {@code --name=value}, as getopt_long takes it), the
 * defaults, the errors in words and {@code --help}, whose layout is the one
 * gogo.jline's usage completion reads, so Tab completes the options in the shell. Every tool
 * parses here and nowhere else: numbers are decimal or {@code 0x} hex, sizes take a K, M, G or T
 * suffix ({@link Args#size}), and a wrong value is a {@link UsageException} naming the tool, the
 * option with its description, the range and the value given.
 *
 * <p>An option perftest or rdma-core has but this tool does not honour is declared
 * {@link #notHonoured}: giving it is refused naming the option and why, as perftest refuses an
 * option that does not apply to the test, instead of being accepted and ignored (issue 45: a
 * latency test's {@code -t}). {@link #conflict} refuses two options given together of which
 * the tool would silently honour only one.
 */
final class Options {

    /**
     * One option: {@code arg} null for a flag; {@code refusal} non-null for an option the tool
     * does not honour (not listed by {@code --help}; giving it is a usage error saying this).
     */
    record Opt(String name, String arg, String description, String dflt, String refusal) {
    }

    static Opt value(String name, String arg, String description, Object dflt) {
        return new Opt(name, arg, description, dflt == null ? null : String.valueOf(dflt), null);
    }

    static Opt flag(String name, String description) {
        return new Opt(name, null, description, null, null);
    }

    /** An option this tool does not honour: {@code why} says so in words (it ends the error). */
    static Opt notHonoured(String name, String description, String why) {
        return new Opt(name, null, description, null, why);
    }

    private final Map<String, String> values = new LinkedHashMap<>();
    private final Map<String, Opt> opts = new LinkedHashMap<>();
    private final String tool;
    private final String summary;
    private final boolean help;

    /** A tool's own options and those a helper declares for it ({@link Remote#options}), in that order. */
    Options(String tool, String summary, Object[] args, List<Opt> declared, List<Opt> more) {
        this(tool, summary, args, java.util.stream.Stream.concat(declared.stream(), more.stream()).toList());
    }

    Options(String tool, String summary, Object[] args, List<Opt> declared) {
        this.tool = tool;
        this.summary = summary;
        for (Opt o : declared) {
            opts.put(o.name(), o);
        }
        boolean h = false;
        for (int i = 0; i < args.length; i++) {
            String a = String.valueOf(args[i]);
            if (a.equals("--help") || a.equals("-h") || a.equals("-?")) {
                h = true;
                continue;
            }
            String inline = null; // getopt_long's --name=value
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 2 && opts.containsKey(a.substring(0, eq))) {
                inline = a.substring(eq + 1);
                a = a.substring(0, eq);
            }
            Opt o = opts.get(a);
            if (o == null) {
                throw new UsageException(tool + ": unknown option '" + a + "' (" + tool + " --help lists its options)");
            }
            if (o.refusal() != null) {
                throw new UsageException(tool + ": option " + a + " (" + o.description() + ") is not supported: " + o.refusal());
            }
            if (o.arg() != null && inline != null) {
                values.put(a, inline);
            } else if (inline != null) {
                throw new UsageException(tool + ": option " + a + " (" + o.description() + ") takes no value, got '" + inline + "'");
            } else if (o.arg() != null) {
                if (i + 1 >= args.length) {
                    throw new UsageException(tool + ": option " + a + " needs a value (" + o.arg() + ": " + o.description() + ")");
                }
                values.put(a, String.valueOf(args[++i]));
            } else {
                values.put(a, "true");
            }
        }
        this.help = h;
    }

    String tool() {
        return tool;
    }

    /** {@code --help} was given: the tool prints {@link #usage()} and does nothing else. */
    boolean help() {
        return help;
    }

    /** Prints the usage (the completion reads printed output, not a command's value); returns null. */
    String printUsage() {
        System.out.print(usage());
        System.out.flush();
        return null;
    }

    String usage() {
        StringBuilder sb = new StringBuilder("usage: ").append(tool).append(" [OPTIONS]\n  ").append(summary).append('\n');
        for (Opt o : opts.values()) {
            if (o.refusal() != null) {
                continue;
            }
            String left = o.name() + (o.arg() == null ? "" : " " + o.arg());
            sb.append(String.format("  %-16s %s%s%n", left, o.description(), o.dflt() == null ? "" : " (default=" + o.dflt() + ")"));
        }
        sb.append(String.format("  %-16s %s%n", "-? --help", "show this help"));
        return sb.toString();
    }

    /**
     * Refuses {@code a} and {@code b} given together when the tool would honour only {@code b}:
     * a usage error naming both and {@code why}.
     */
    void conflict(String a, String b, String why) {
        if (values.containsKey(a) && values.containsKey(b)) {
            throw new UsageException(tool + ": options " + a + " and " + b + " cannot be used together: " + why);
        }
    }

    /** Whether option {@code o} (a flag or a value) was given on the command line. */
    boolean given(String o) {
        return values.containsKey(o);
    }

    boolean flag(String f) {
        return values.containsKey(f);
    }

    String string(String o) {
        String v = values.get(o);
        return v != null ? v : opts.get(o).dflt();
    }

    /** The option's number in [min, max] (K/M/G suffixes for sizes), or its declared default. */
    long number(String o, long min, long max) {
        Opt opt = opts.get(o);
        String v = values.getOrDefault(o, opt.dflt());
        return Args.size(tool, "option " + o + " (" + opt.description() + ")", v, min, max);
    }
}
