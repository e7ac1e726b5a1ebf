package org.peerdirect.hca.dpa;

import java.util.Optional;

/**
 * The handler's source line for reports: the first stack frame of device code (a class defined by
 * an image loader). Walks the stack, so it is called only when something is reported or a site
 * must be recorded for a later report (checking modes only).
 */
final class Sites {

    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);

    private Sites() {
    }

    /** {@code Class.method:line} of the innermost device frame on this thread, or "?". */
    static String here() {
        Optional<String> s = WALKER.walk(frames -> frames
                .filter(f -> f.getDeclaringClass().getClassLoader() instanceof ImageLoader)
                .findFirst()
                .map(f -> f.getClassName() + "." + f.getMethodName() + ":" + f.getLineNumber()));
        return s.orElse("?");
    }
}
