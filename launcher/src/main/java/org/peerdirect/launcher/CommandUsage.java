package org.peerdirect.launcher;

import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;

/**
 * A command's usage line and the one-line answer to a wrong number of arguments, from the
 * command's own methods: each public method Gogo would call for the function is one form, each of
 * its parameters one {@code <placeholder>} taken from the parameter's {@code @Descriptor} (its text
 * up to the first comma or parenthesis). Gogo's own answer names Java types only ("Cannot coerce
 * spawn() to any of [(String)]").
 *
 * <p>The annotation types live in the gogo.runtime bundle, not on the launcher's class path: they
 * are recognised by name.
 */
final class CommandUsage {

    private static final String DESCRIPTOR = "org.apache.felix.service.command.Descriptor";
    private static final String PARAMETER = "org.apache.felix.service.command.Parameter";
    private static final String SESSION = "org.apache.felix.service.command.CommandSession";

    /** One way to call the command: its placeholders, and how many arguments it takes. */
    record Form(List<String> placeholders, int min, int max) {
        boolean takes(int n) {
            return n >= min && n <= max;
        }

        String text() {
            return String.join(" ", placeholders);
        }
    }

    private CommandUsage() {
    }

    /**
     * Arguments no form of a command takes, in words. Its {@code toString()} is the message alone:
     * the interactive shell prints a failed statement's exception with {@code toString()}.
     */
    static final class WrongArguments extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        WrongArguments(String message, Throwable gogo) {
            super(message, gogo);
        }

        @Override
        public String toString() {
            return getMessage();
        }
    }

    /**
     * True for Gogo's own answer to arguments no method of {@code function} takes: thrown by its
     * Reflective before the command ran, so not a failure of the command itself.
     */
    static boolean isGogoCoercion(Throwable t, String function) {
        if (!(t instanceof IllegalArgumentException) || t.getMessage() == null) {
            return false;
        }
        StackTraceElement[] at = t.getStackTrace();
        return t.getMessage().toLowerCase(Locale.ROOT).startsWith("cannot coerce " + function.toLowerCase(Locale.ROOT) + "(")
                && at.length > 0 && at[0].getClassName().equals("org.apache.felix.gogo.runtime.Reflective");
    }

    /** The forms of {@code function} on {@code type}, as Gogo's Reflective matches them, fewest arguments first. */
    static List<Form> forms(Class<?> type, String function) {
        String name = function.toLowerCase(Locale.ROOT);
        List<Form> forms = new ArrayList<>();
        for (Method m : type.getMethods()) {
            String n = m.getName().toLowerCase(Locale.ROOT);
            if (m.getDeclaringClass() == Object.class
                    || !(n.equals(name) || n.equals("get" + name) || n.equals("is" + name) || n.equals("_main"))) {
                continue;
            }
            forms.add(form(m));
        }
        forms.sort(Comparator.comparingInt(Form::min).thenComparingInt(Form::max));
        return forms;
    }

    private static Form form(Method m) {
        Class<?>[] types = m.getParameterTypes();
        Annotation[][] annotations = m.getParameterAnnotations();
        List<String> placeholders = new ArrayList<>();
        int min = 0;
        boolean open = false;
        for (int i = 0; i < types.length; i++) {
            if (i == 0 && types[i].getName().equals(SESSION)) {
                continue; // Gogo passes the session itself
            }
            String desc = annotation(annotations[i], DESCRIPTOR, "value");
            Object option = annotationValue(annotations[i], PARAMETER, "names");
            if (option instanceof String[] names && names.length > 0) {
                placeholders.add("[" + names[0] + "]"); // an option: Gogo fills it in when absent
                continue;
            }
            boolean rest = m.isVarArgs() && i == types.length - 1;
            String p = placeholder(desc, rest ? types[i].getComponentType() : types[i]);
            if (rest) {
                placeholders.add(p.startsWith("[") ? p : "[" + p + "...]");
                open = true;
            } else {
                placeholders.add(p);
                min++;
            }
        }
        return new Form(placeholders, min, open ? Integer.MAX_VALUE : min);
    }

    /**
     * {@code <process id>} from "process id (kernel:ps lists them)"; option syntax ("[-d mlx5_N]")
     * stays as written, a quoted literal ("'huge' for a hugetlb mapping") is the word itself.
     */
    static String placeholder(String descriptor, Class<?> type) {
        if (descriptor == null || descriptor.isBlank()) {
            return "<" + type.getSimpleName().toLowerCase(Locale.ROOT) + ">";
        }
        String d = descriptor.strip();
        if (d.startsWith("[") || d.startsWith("-")) {
            return d.startsWith("[") ? d : "[" + d + "]";
        }
        if (d.startsWith("'") && d.indexOf('\'', 1) > 1) {
            return d.substring(1, d.indexOf('\'', 1)); // a literal word: "'huge' for a hugetlb mapping"
        }
        int cut = d.length();
        for (String stop : new String[] {" (", ",", ";"}) {
            int i = d.indexOf(stop);
            if (i > 0 && i < cut) {
                cut = i;
            }
        }
        return "<" + d.substring(0, cut).strip() + ">";
    }

    /**
     * The one-line answer to arguments no form takes: what the command expects, what it got, its
     * usage and where the full help is. {@code shown} is the name the user knows the command by.
     */
    static String wrongArguments(String shown, List<Form> forms, List<?> args) {
        return wrongArguments(shown, forms, args, true);
    }

    /** As above; {@code helpful}: whether {@code help <shown>} describes the command (the launcher's own have no descriptions). */
    static String wrongArguments(String shown, List<Form> forms, List<?> args, boolean helpful) {
        String usage = usage(shown, forms);
        String got = args.isEmpty() ? "none" : args.size() + " (" + describe(args) + ")";
        boolean countFits = forms.stream().anyMatch(f -> f.takes(args.size()));
        String what = countFits
                ? "these arguments fit no form of the command (got " + got + ")"
                : "expected " + arity(forms) + ", got " + got;
        return shown + ": " + what + "; usage: " + usage + (helpful ? "; see help " + shown : "");
    }

    /** {@code kernel:mmap <process id> <length in bytes> [<huge>]}: forms that extend one another in one line. */
    static String usage(String shown, List<Form> forms) {
        if (forms.isEmpty()) {
            return shown;
        }
        // each form a prefix of the next: one line with the extra placeholders in brackets
        boolean chain = true;
        for (int i = 1; i < forms.size(); i++) {
            List<String> prev = forms.get(i - 1).placeholders();
            List<String> next = forms.get(i).placeholders();
            chain &= next.size() > prev.size() && next.subList(0, prev.size()).equals(prev);
        }
        if (chain) {
            // each step's extra placeholders as one optional group: config [<pid> <property> <value>]
            StringBuilder sb = new StringBuilder(shown);
            List<String> prev = forms.getFirst().placeholders();
            prev.forEach(p -> sb.append(' ').append(p));
            for (Form f : forms.subList(1, forms.size())) {
                List<String> extra = f.placeholders().subList(prev.size(), f.placeholders().size());
                String group = String.join(" ", extra);
                sb.append(' ').append(extra.size() == 1 && group.startsWith("[") ? group : "[" + group + "]");
                prev = f.placeholders();
            }
            return sb.toString();
        }
        List<String> lines = new ArrayList<>();
        for (Form f : forms) {
            lines.add((shown + " " + f.text()).strip());
        }
        return String.join(" | ", new java.util.LinkedHashSet<>(lines));
    }

    /** "1 argument", "2 or 3 arguments", "no arguments", "at least 1 argument". */
    static String arity(List<Form> forms) {
        TreeSet<Integer> counts = new TreeSet<>();
        int open = Integer.MAX_VALUE;
        for (Form f : forms) {
            if (f.max() == Integer.MAX_VALUE) {
                open = Math.min(open, f.min());
            } else {
                counts.add(f.min());
            }
        }
        List<String> parts = new ArrayList<>();
        for (int n : counts) {
            if (n < open) {
                parts.add(Integer.toString(n));
            }
        }
        String fixed = switch (parts.size()) {
            case 0 -> "";
            case 1 -> parts.getFirst();
            default -> String.join(", ", parts.subList(0, parts.size() - 1)) + " or " + parts.getLast();
        };
        if (open != Integer.MAX_VALUE) {
            String atLeast = "at least " + open + (open == 1 ? " argument" : " arguments");
            return fixed.isEmpty() ? atLeast : fixed + " or " + atLeast;
        }
        if (fixed.equals("0")) {
            return "no arguments";
        }
        if (parts.size() == 2 && parts.getFirst().equals("0")) {
            return "no arguments or " + parts.getLast() + (parts.getLast().equals("1") ? " argument" : " arguments");
        }
        return fixed + (fixed.equals("1") ? " argument" : " arguments");
    }

    private static String describe(List<?> args) {
        List<String> shown = new ArrayList<>();
        for (Object a : args) {
            String s = String.valueOf(a);
            shown.add(s.length() > 40 ? s.substring(0, 37) + "..." : s);
        }
        return String.join(" ", shown);
    }

    private static String annotation(Annotation[] annotations, String type, String element) {
        Object v = annotationValue(annotations, type, element);
        return v instanceof String s ? s : null;
    }

    private static Object annotationValue(Annotation[] annotations, String type, String element) {
        for (Annotation a : annotations) {
            if (a.annotationType().getName().equals(type)) {
                try {
                    return a.annotationType().getMethod(element).invoke(a);
                } catch (ReflectiveOperationException e) {
                    return null;
                }
            }
        }
        return null;
    }
}
