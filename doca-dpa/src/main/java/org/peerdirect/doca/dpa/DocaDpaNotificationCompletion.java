package org.peerdirect.doca.dpa;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * {@code struct doca_dpa_notification_completion}: what one DPA thread (or an RPC) wakes another
 * with ({@code doca_dpa_dev_thread_notify}); no completion element is produced. [model] Its DPA
 * handle is the attached thread's DPA_THREAD id, and a notification is the RTOS's activation of
 * that thread ({@code flexio_dev_event_handler_activate}): a thread that is not running (not yet
 * {@code run}, or stopped) ignores it.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_notification_completion_create, _start, _get_dpa_handle, _stop, _destroy</a>
 */
public final class DocaDpaNotificationCompletion {

    private enum State {
        CREATED, STARTED, STOPPED, DESTROYED
    }

    private final DocaDpaThread thread;
    /** The thread's DPA context's lock: the state and the thread's list of what triggers it change together under it. */
    private final java.util.concurrent.locks.ReentrantLock lock;
    private volatile State state = State.CREATED;
    private long handle;

    private DocaDpaNotificationCompletion(DocaDpaThread thread) {
        this.thread = thread;
        this.lock = thread.dpa().lock;
    }

    /** {@code doca_dpa_notification_completion_create}: for {@code thread}. */
    public static DocaDpaNotificationCompletion create(DocaDpa dpa, DocaDpaThread thread) {
        String w = "doca_dpa_notification_completion_create";
        DocaException.check(dpa != null && thread != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null DPA or thread");
        return new DocaDpaNotificationCompletion(thread);
    }

    /** {@code doca_dpa_notification_completion_start}: the thread must be started (its DPA thread exists). */
    public void start() {
        String w = "doca_dpa_notification_completion_start";
        lock.lock(); // dpa:doca lists it with its thread under this lock
        try {
            check(w);
            DocaException.check(state == State.CREATED, DocaError.DOCA_ERROR_BAD_STATE, w + ": started already");
            handle = thread.threadId(w);
            state = State.STARTED;
            thread.attachCompletion(this);
        } finally {
            lock.unlock();
        }
    }

    /** {@code doca_dpa_notification_completion_get_dpa_handle}: what {@code doca_dpa_dev_thread_notify} takes. BAD_STATE unless started. */
    public long getDpaHandle() {
        String w = "doca_dpa_notification_completion_get_dpa_handle";
        check(w);
        DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": not started");
        return handle;
    }

    /** {@code doca_dpa_notification_completion_stop}. */
    public void stop() {
        String w = "doca_dpa_notification_completion_stop";
        lock.lock();
        try {
            check(w);
            DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, w + ": not started");
            state = State.STOPPED;
            thread.detachCompletion(this);
        } finally {
            lock.unlock();
        }
    }

    /** {@code doca_dpa_notification_completion_destroy}; INVALID_VALUE the second time. */
    public void destroy() {
        lock.lock();
        try {
            check("doca_dpa_notification_completion_destroy");
            state = State.DESTROYED;
            thread.detachCompletion(this);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "notification completion " + state.name().toLowerCase(java.util.Locale.ROOT) + (state == State.STARTED ? ", handle " + handle : "");
    }

    private void check(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": destroyed already");
    }
}
