package org.peerdirect.hca.dpa;

/**
 * A DPA thread's state in the RTOS, with its one transition method. RUNNABLE means "triggered,
 * queued for an EU" (as in an OS run queue): {@code run} makes a created thread triggerable
 * (WAITING) without running it, as {@code flexio_event_handler_run} does; the design sketch's
 * "CREATED → RUNNABLE(run) → WAITING" conflated the two.
 *
 * <pre>
 * CREATED --RUN--> WAITING --TRIGGER--> RUNNABLE --EU_GRANTED--> RUNNING
 * RUNNING --RESCHEDULE--> WAITING   (a latched trigger: RESCHEDULE then TRIGGER)
 * RUNNING --RETRIGGER--> RUNNABLE    RUNNING --FINISH--> FINISHED
 * RUNNING --YIELD--> SUSPENDED --TRIGGER--> RUNNABLE (resumes after the yield)
 * any --PROCESS_END--> PROCESS_ENDED
 * </pre>
 */
public enum ThreadState {
    CREATED, RUNNABLE, RUNNING, WAITING, SUSPENDED, FINISHED, PROCESS_ENDED;

    /** What happens to a thread. */
    public enum Event {
        RUN, TRIGGER, EU_GRANTED, RESCHEDULE, RETRIGGER, FINISH, YIELD, PROCESS_END
    }

    /**
     * The state after {@code e}.
     *
     * @throws IllegalStateException when {@code e} cannot happen in this state (the caller checks
     *         the cases that are not errors, such as a trigger to a running thread, first)
     */
    public ThreadState next(Event e) {
        if (e == Event.PROCESS_END) {
            return PROCESS_ENDED;
        }
        ThreadState n = switch (this) {
            case CREATED -> e == Event.RUN ? WAITING : null;
            case WAITING, SUSPENDED -> e == Event.TRIGGER ? RUNNABLE : null;
            case RUNNABLE -> e == Event.EU_GRANTED ? RUNNING : null;
            case RUNNING -> switch (e) {
                case RESCHEDULE -> WAITING;
                case RETRIGGER -> RUNNABLE;
                case FINISH -> FINISHED;
                case YIELD -> SUSPENDED;
                default -> null;
            };
            case FINISHED, PROCESS_ENDED -> null;
        };
        if (n == null) {
            throw new IllegalStateException("DPA thread in " + this + " cannot take " + e);
        }
        return n;
    }
}
