package org.peerdirect.launcher;

import java.util.ArrayList;
import java.util.List;

/**
 * Splits {@code "cmd1; cmd2"} into statements at top-level semicolons and newlines, leaving
 * semicolons inside quotes, braces, brackets and parentheses alone. Each statement is then run
 * with its own {@code execute()}: Gogo shows only the last statement's output when one call
 * holds several (BUILD_NOTES), and one call per statement lets a failure name its command.
 */
final class CommandSplitter {

    private CommandSplitter() {
    }

    static List<String> split(CharSequence text) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        int depth = 0;
        char quote = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (quote != 0) {
                cur.append(c);
                if (c == '\\' && i + 1 < text.length()) {
                    cur.append(text.charAt(++i));
                } else if (c == quote) {
                    quote = 0;
                }
                continue;
            }
            if (c == '#' && depth == 0 && cur.toString().isBlank()) {
                // a comment runs to the end of its line
                while (i + 1 < text.length() && text.charAt(i + 1) != '\n') {
                    i++;
                }
                continue;
            }
            switch (c) {
                case '"', '\'' -> {
                    quote = c;
                    cur.append(c);
                }
                case '{', '[', '(' -> {
                    depth++;
                    cur.append(c);
                }
                case '}', ']', ')' -> {
                    depth = Math.max(0, depth - 1);
                    cur.append(c);
                }
                case ';', '\n' -> {
                    if (depth == 0) {
                        flush(cur, out);
                    } else {
                        cur.append(c);
                    }
                }
                default -> cur.append(c);
            }
        }
        if (quote != 0) {
            throw new CommandLine.UsageException("unterminated " + quote + " quote in: " + text);
        }
        flush(cur, out);
        return out;
    }

    private static void flush(StringBuilder cur, List<String> out) {
        String s = cur.toString().strip();
        if (!s.isEmpty()) {
            out.add(s);
        }
        cur.setLength(0);
    }
}
