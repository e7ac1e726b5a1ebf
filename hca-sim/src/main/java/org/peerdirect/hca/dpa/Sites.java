package org.peerdirect.hca.dpa;

import java.util.Set;

/**
 * The handler's source line for reports: the innermost stack frame of device code (a class defined
 * by an image loader) and, when that frame is in a statically linked device library (flexio-dev's
 * {@code FlexioDev.qpSqRingDb} rings the doorbell the handler forgot to write back before), the
 * first frame out of that library's package, the user's line that called it. Walking the stack is
 * the checker's main cost, so it is done only when something is reported or a site must be kept for
 * a later report (checking modes only), and the frames are formatted
 * ({@code Class.method:line}) only when a report is written.
 */
final class Sites {

    /** Device frames sit a few frames below the walker: Dpa, Runner, the memory model, this class. */
    private static final StackWalker WALKER = StackWalker.getInstance(Set.of(StackWalker.Option.RETAIN_CLASS_REFERENCE), 12);

    /**
     * Where device code was: {@code at} the innermost device frame, {@code from} the first device
     * frame outside {@code at}'s package, or null when the whole device stack is one package.
     */
    record Site(StackWalker.StackFrame at, StackWalker.StackFrame from) {
    }

    private Sites() {
    }

    /** The device frames on this thread, or null outside device code. */
    static Site frame() {
        return WALKER.walk(frames -> {
            StackWalker.StackFrame at = null;
            for (var it = frames.filter(f -> f.getDeclaringClass().getClassLoader() instanceof ImageLoader).iterator(); it.hasNext();) {
                StackWalker.StackFrame f = it.next();
                if (at == null) {
                    at = f;
                } else if (!f.getDeclaringClass().getPackageName().equals(at.getDeclaringClass().getPackageName())) {
                    return new Site(at, f);
                }
            }
            return at == null ? null : new Site(at, null);
        });
    }

    /** {@code Class.method:line}, with {@code (called from Class.method:line)} for a library frame, or "?". */
    static String format(Site s) {
        if (s == null) {
            return "?";
        }
        String at = s.at.getClassName() + "." + s.at.getMethodName() + ":" + s.at.getLineNumber();
        return s.from == null ? at
                : at + " (called from " + s.from.getClassName() + "." + s.from.getMethodName() + ":" + s.from.getLineNumber() + ")";
    }

    /** {@link #format} of this thread's device frames. */
    static String here() {
        return format(frame());
    }

    /**
     * {@link #format} of another thread's device frames, from its Java stack (a C8 finding names
     * the hart already inside the object; its frames are taken only then). An image's classes
     * are the ones whose class loader's name starts with {@link ImageLoader#NAME}.
     */
    static String of(Thread t) {
        if (t == null) {
            return "?";
        }
        StackTraceElement at = null;
        for (StackTraceElement f : t.getStackTrace()) {
            if (f.getClassLoaderName() == null || !f.getClassLoaderName().startsWith(ImageLoader.NAME)) {
                continue;
            }
            if (at == null) {
                at = f;
            } else if (!packageOf(f).equals(packageOf(at))) {
                return line(at) + " (called from " + line(f) + ")";
            }
        }
        return at == null ? "? (no device frame: its call unwound)" : line(at);
    }

    private static String packageOf(StackTraceElement f) {
        int dot = f.getClassName().lastIndexOf('.');
        return dot < 0 ? "" : f.getClassName().substring(0, dot);
    }

    private static String line(StackTraceElement f) {
        return f.getClassName() + "." + f.getMethodName() + ":" + f.getLineNumber();
    }
}
