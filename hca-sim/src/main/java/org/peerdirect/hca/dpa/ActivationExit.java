package org.peerdirect.hca.dpa;

/**
 * How the RTOS unwinds an activation from an ISA call that "does not return" (reschedule, finish,
 * retrigger, process finish, error, a fatal fault): thrown from the call, caught by the
 * activation's trampoline. An {@code Error} so device code cannot catch it by accident; the
 * verifier refuses code that catches {@code Throwable} or {@code Error}. No stack trace (it is
 * control flow).
 */
final class ActivationExit extends Error {

    private static final long serialVersionUID = 1L;

    enum Kind {
        RESCHEDULE, FINISH, RETRIGGER, PROCESS_END
    }

    final Kind kind;

    ActivationExit(Kind kind) {
        super(kind.name(), null, false, false);
        this.kind = kind;
    }
}
