package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;


import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;

/**
 * DOCA DPA completion contexts: the calls in DOCA's order make a DPA_THREAD CQ in the DPA heap
 * bound to the thread (visible in the firmware, gone after stop); every call out of order answers
 * the {@code doca_error_t} DOCA documents, and nothing is left. Completions arriving in a context
 * are DOCA RDMA's (doca-rdma's tests, scenario 6).
 */
class DocaDpaCompletionTest extends DpaLabFixture {

    DocaDpaCompletionTest() {
        super(null);
    }

    /** The DPA context with its app, not started: each test starts it; the fixture's teardown stops and destroys it. */
    @BeforeEach
    void up() {
        dpa = DocaDpa.create(dev);
        dpa.setApp(KernelProgsStubs.APP);
        dpas.add(dpa);
    }

    private static DocaError status(Executable e) {
        return assertThrows(DocaException.class, e).error();
    }

    private DocaDpaThread thread() {
        DocaDpaThread t = DocaDpaThread.create(dpa);
        t.setFuncArg(KernelProgsStubs.EU_WORKER, 0);
        return t;
    }

    /** The CQs the BlueField-3's firmware holds ({@code devxDescribe}'s "CQs n"). */
    private long cqs() {
        String d = lab.models.get(0).devxDescribe();
        return Long.parseLong(d.substring(d.lastIndexOf("CQs ") + 4).trim());
    }

    @Test
    void theCallsInDocasOrderMakeACqBoundToTheThreadAndStopTakesItDown() {
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> DocaDpaCompletion.create(dpa, 4)), "the DPA context is not started");
        dpa.start();
        DocaDpaThread t = thread();
        t.start();
        long before = cqs();
        DocaDpaCompletion c = DocaDpaCompletion.create(dpa, 5);
        c.setThread(t);
        c.start();
        assertNotEquals(0, c.getDpaHandle());
        assertEquals(before + 1, cqs(), "one CQ more in the firmware: " + lab.models.get(0).devxDescribe());
        assertTrue(c.toString().contains("started"), c.toString());
        t.run();
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(t::destroy), "the completion context still triggers the thread");
        c.stop();
        assertEquals(before, cqs(), "stop destroyed the CQ");
        c.destroy();
        t.destroy();
    }

    /**
     * DOCA's "manual polling": a completion context started with no thread (as the samples'
     * {@code dpa_completion_obj_init} does for the initiator) is a CQ no thread is bound to; it
     * still has a handle, stops and destroys, and may not take a thread while started. (A kernel
     * polling it: doca-rdma's {@code DocaRdmaTest}.)
     */
    @Test
    void aCompletionContextWithoutAThreadStartsAsACqOnlyPolled() {
        dpa.start();
        long before = cqs();
        DocaDpaCompletion c = DocaDpaCompletion.create(dpa, 4);
        c.start();
        assertNotEquals(0, c.getDpaHandle());
        assertEquals(before + 1, cqs(), "one CQ more in the firmware: " + lab.models.get(0).devxDescribe());
        assertTrue(c.toString().contains("started") && !c.toString().contains("thread"), c.toString());
        DocaDpaThread t = thread();
        t.start();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> c.setThread(t)), "a thread set after start");
        c.stop();
        assertEquals(before, cqs(), "stop destroyed the CQ");
        c.setThread(t); // stopped: it may take a thread now, and starts bound to it
        c.start();
        assertEquals(before + 1, cqs());
        c.destroy();
        assertEquals(before, cqs());
        t.destroy();
    }

    @Test
    void callsInTheWrongOrderAnswerDocasErrors() {
        dpa.start();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaDpaCompletion.create(dpa, 0)), "queue size 0");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaDpaCompletion.create(null, 4)));
        DocaDpaCompletion c = DocaDpaCompletion.create(dpa, 4);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(c::getDpaHandle), "not started");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> c.setThread(null)));
        DocaDpaThread t = thread();
        c.setThread(t);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(c::start), "the thread is not started");
        t.start();
        t.run();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> c.setThread(t)), "attached after the thread runs");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(c::start), "started after the thread runs");
        DocaDpaThread t2 = thread();
        t2.start();
        c.setThread(t2);
        c.start();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(c::start), "started twice");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> c.setThread(t2)), "the thread changed after start");
        c.destroy(); // stops it first
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(c::destroy), "double destroy");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(c::getDpaHandle), "destroyed");
        t.destroy();
        t2.destroy();
    }
}
