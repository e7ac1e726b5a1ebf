package org.peerdirect.flexio;

import java.util.ArrayDeque;
import java.util.Objects;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@code struct flexio_cmdq}: an asynchronous queue of {@code __dpa_rpc__} tasks. [model]: the
 * C library keeps a ring of task descriptors in DPA memory served by {@code workers} DPA threads
 * that call each task's function through a pointer; DPA code in the model cannot call a function
 * by address (no indirect call at the ISA, no reflection past the verifier), so here a host
 * dispatcher thread takes the tasks in order and runs each on its entry's RPC thread as
 * {@link FlexioProcess#call} does. {@code workers} and {@code batchSize} are checked and kept, not
 * used to parallelise. A task that fails (the process ended) fails every later one; the process's
 * status says why.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_cmdq_create, _task_add, _state_running, _is_empty, _destroy</a>
 */
public final class FlexioCmdq implements AutoCloseable {

    /** {@code flexio_cmdq_state}. */
    public enum State {
        /** {@code FLEXIO_CMDQ_STATE_PENDING}: tasks wait until {@link #stateRunning}. */
        PENDING,
        /** {@code FLEXIO_CMDQ_STATE_RUNNING}. */
        RUNNING
    }

    /** {@code struct flexio_cmdq_attr}. */
    public record Attr(int workers, int batchSize, State state) {
        public Attr {
            if (workers < 1 || batchSize < 1) {
                throw new IllegalArgumentException("a cmdq needs a worker and a batch size of at least 1, not " + workers + "/" + batchSize);
            }
            Objects.requireNonNull(state, "state");
        }
    }

    private record Task(FlexioFunc func, Object[] args) {
    }

    private final FlexioProcess process;
    private final Attr attr;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    /** Guarded by {@link #lock}. */
    private final ArrayDeque<Task> tasks = new ArrayDeque<>();
    private State state;
    private boolean stop;
    private int running;
    private long done;
    private FlexioException failed;
    private final Thread dispatcher;
    /** The process's teardown of this queue: stop, without waiting (its dispatcher may wait for the process's lock). */
    private final Runnable teardown;

    private FlexioCmdq(FlexioProcess process, Attr attr) {
        this.process = process;
        this.attr = attr;
        this.state = attr.state();
        this.teardown = process.own(this::stop);
        this.dispatcher = Thread.ofPlatform().daemon().name("flexio-cmdq-" + process.id()).start(this::dispatch);
    }

    /** {@code flexio_cmdq_create}; the process's destroy stops it too. */
    public static FlexioCmdq create(FlexioProcess p, Attr attr) {
        Objects.requireNonNull(p, "process");
        p.lock.lock();
        try {
            p.checkAlive();
            return new FlexioCmdq(p, attr);
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_cmdq_create", e);
        } finally {
            p.lock.unlock();
        }
    }

    /**
     * {@code flexio_cmdq_task_add}: queues {@code func(args)}; the arguments are packed now.
     *
     * @throws FlexioException FAILED once a task failed or the queue was destroyed
     */
    public void taskAdd(FlexioFunc func, Object... args) {
        if (func.kind() != FlexioFunc.Kind.RPC) {
            throw new IllegalArgumentException(func.name() + " is no __dpa_rpc__ entry");
        }
        func.packArgs(args); // the packer's checks, at the call that gave the arguments
        lock.lock();
        try {
            if (failed != null || stop) {
                throw new FlexioException(FlexioStatus.FAILED, "flexio_cmdq_task_add: " + (stop ? "the cmdq was destroyed"
                        : "an earlier task failed: " + failed.getMessage()));
            }
            tasks.add(new Task(func, args.clone()));
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_cmdq_state_running}: a PENDING queue starts its tasks. */
    public void stateRunning() {
        lock.lock();
        try {
            state = State.RUNNING;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_cmdq_is_empty}: every task added so far has run (or the queue failed). */
    public boolean isEmpty() {
        lock.lock();
        try {
            return (tasks.isEmpty() || failed != null) && running == 0;
        } finally {
            lock.unlock();
        }
    }

    /** Tasks that ran to their end. */
    public long tasksDone() {
        lock.lock();
        try {
            return done;
        } finally {
            lock.unlock();
        }
    }

    /** The failure that stopped the queue, or null. */
    public FlexioException failure() {
        lock.lock();
        try {
            return failed;
        } finally {
            lock.unlock();
        }
    }

    public Attr attr() {
        return attr;
    }

    private void dispatch() {
        while (true) {
            Task t;
            lock.lock();
            try {
                while (!stop && (state == State.PENDING || tasks.isEmpty() || failed != null)) {
                    changed.awaitUninterruptibly();
                }
                if (stop) {
                    return;
                }
                t = tasks.poll();
                running++;
            } finally {
                lock.unlock();
            }
            FlexioException f = null;
            try {
                process.call(t.func(), t.args());
            } catch (FlexioException e) {
                f = e;
            }
            lock.lock();
            try {
                running--;
                if (f == null) {
                    done++;
                } else if (failed == null) {
                    failed = f;
                }
                changed.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    private void stop() {
        lock.lock();
        try {
            stop = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_cmdq_destroy}: waits for the running task, drops those not started. */
    public void destroy() {
        process.lock.lock();
        try {
            if (process.alive()) {
                process.disown(teardown);
            }
        } finally {
            process.lock.unlock();
        }
        stop();
        try {
            dispatcher.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FlexioException(FlexioStatus.FAILED, "flexio_cmdq_destroy interrupted");
        }
    }

    @Override
    public void close() {
        destroy();
    }
}
