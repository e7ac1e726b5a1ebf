package org.peerdirect.launcher;

import java.util.ArrayList;
import java.util.List;

/**
 * The launcher's own arguments. Unknown options are a usage error that names the option.
 *
 * <pre>
 * peerdirect [--keep-cache] [--home DIR] [--bundles DIR] [--jfr FILE] [--web [[HOST:]PORT]] [-c "cmd; cmd"]... [demo]
 * </pre>
 */
record CommandLine(List<String> commands, boolean demo, boolean keepCache, String home, String bundles, String jfr, WebOption web) {

    static final String USAGE = """
            usage: peerdirect [options] [demo | test | bench [jmh options]]
              (no arguments)   interactive Gogo shell (line editing, completion); Ctrl-D or 'shutdown' leave,
                               Ctrl-C interrupts the running command
              -c "cmd; cmd"    run commands non-interactively and exit (repeatable); exit 1 names a failed command
              demo             run the showcase script and exit
              --keep-cache     reuse the framework cache of the previous run instead of starting fresh
              --home DIR       keep this run's state (framework cache, sysfs mirror) in DIR: one container
                               per folder, so a second container at the same time needs its own
              --jfr FILE       record the session with Java Flight Recorder (peerdirect's events: page faults,
                               invalidations, peer-client callbacks, firmware commands, IOMMU faults) into FILE
              --web [[HOST:]PORT]  serve the web console (Felix Web Console with peerdirect's pages, live plots)
                               and /metrics on http://127.0.0.1:8765 or the port given; another address
                               needs the Web Console's credentials (-Dfelix.webconsole.username/password
                               in PEERDIRECT_JAVA_OPTS)
              -v               show the full Maven output when building, and stack traces of failed commands
            exit codes: 0 ok, 1 a command failed, 2 a wrong command line, 3 the container did not start
                        (or another one runs from the same folder), 130 Ctrl-C in a -c or demo run
            """;

    static CommandLine parse(String... args) {
        List<String> commands = new ArrayList<>();
        boolean demo = false;
        boolean keep = false;
        String home = null;
        String bundles = null;
        String jfr = null;
        WebOption web = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "-c", "--command" -> {
                    if (i + 1 >= args.length) {
                        throw new UsageException("option " + a + " needs a command string, for example -c \"lb\"");
                    }
                    List<String> split = CommandSplitter.split(args[++i]);
                    if (split.isEmpty()) {
                        // it used to open the interactive shell, which a script never expects
                        throw new UsageException("option " + a + " got an empty command string");
                    }
                    commands.addAll(split);
                }
                case "demo" -> demo = true;
                case "--keep-cache" -> keep = true;
                case "--home" -> home = value(args, ++i, a);
                case "--bundles" -> bundles = value(args, ++i, a);
                case "--jfr" -> jfr = value(args, ++i, a);
                case "--web" -> web = WebOption.parse(i + 1 < args.length && WebOption.isValue(args[i + 1]) ? args[++i] : null);
                case "-h", "--help" -> throw new UsageException(null);
                default -> throw new UsageException("unknown argument '" + a + "'");
            }
        }
        if (demo && !commands.isEmpty()) {
            throw new UsageException("'demo' and -c cannot be combined: run them one after the other");
        }
        if (web != null) {
            web.checkCredentials();
        }
        return new CommandLine(List.copyOf(commands), demo, keep, home, bundles, jfr, web);
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new UsageException("option " + option + " needs a value");
        }
        return args[i];
    }

    boolean interactive() {
        return !demo && commands.isEmpty();
    }

    /** A wrong command line: the message names what was wrong; null message means "print usage only". */
    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }
}
