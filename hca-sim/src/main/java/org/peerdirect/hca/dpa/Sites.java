package org.peerdirect.hca.dpa;

import java.util.Set;

/**
 * The handler's source line for reports: the first stack frame of device code (a class defined by
 * an image loader). Walking the stack is the checker's main cost, so it is done only when
 * something is reported or a site must be kept for a later report (checking modes only), and the
 * frame is formatted ({@code Class.method:line}) only when a report is written.
 */
final class Sites {

    /** Device frames sit a few frames below the walker: Dpa, Runner, the memory model, this class. */
    private static final StackWalker WALKER = StackWalker.getInstance(Set.of(StackWalker.Option.RETAIN_CLASS_REFERENCE), 8);

    private Sites() {
    }

    /** The innermost device frame on this thread, or null. */
    static StackWalker.StackFrame frame() {
        return WALKER.walk(frames -> frames
                .filter(f -> f.getDeclaringClass().getClassLoader() instanceof ImageLoader)
                .findFirst().orElse(null));
    }

    /** {@code Class.method:line}, or "?". */
    static String format(StackWalker.StackFrame f) {
        return f == null ? "?" : f.getClassName() + "." + f.getMethodName() + ":" + f.getLineNumber();
    }

    /** {@code Class.method:line} of the innermost device frame on this thread, or "?". */
    static String here() {
        return format(frame());
    }
}
