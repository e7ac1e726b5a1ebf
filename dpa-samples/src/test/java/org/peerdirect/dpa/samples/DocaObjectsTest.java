package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.dpa.DocaDpaObjects;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code dpa:doca}'s printout of the service's snapshot (the snapshot itself is doca-dpa's
 * {@code DocaDpaObjectsTest}, on live objects): each context's block, the pid filter, bad arguments.
 */
class DocaObjectsTest {

    private static final DocaDpaObjects.Context STARTED = new DocaDpaObjects.Context(7, "app", "mlx5_2", "dpa_sample_kernel_launch", "started", 3,
            List.of(new DocaDpaObjects.Thread("euWorker", 0x40, "running", 5, 2, List.of("notification completion started, handle 9")),
                    new DocaDpaObjects.Thread("idle", 0, "created", -1, 0, List.of())),
            List.of(new DocaDpaObjects.Event("doca_sync_event 4 started, publisher CPU, subscriber DPA", "5")),
            new DocaDpaObjects.Kernels(2, 2, 1, 1, "helloWorld x1, wait event 4 passes 4, completion event 5 set 10",
                    "helloWorld x1, wait none, completion none", null));
    private static final DocaDpaObjects.Context CREATED = new DocaDpaObjects.Context(8, "other", "mlx5_2", "-", "created", -1, List.of(), List.of(),
            new DocaDpaObjects.Kernels(0, 0, 0, 0, "-", "-", null));

    @Test
    void eachContextIsABlockWithItsThreadsEventsAndKernels() {
        assertEquals(String.join("\n",
                "process 7 (app): doca_dpa on mlx5_2, app dpa_sample_kernel_launch, started, FlexIO process 3 (dpa:ps)",
                "  thread euWorker(0x40) running, EU 5, activations 2",
                "    triggered by: notification completion started, handle 9",
                "  thread idle(0x0) created, activations 0",
                "    triggered by: nothing attached",
                "  doca_sync_event 4 started, publisher CPU, subscriber DPA; value 5",
                "  kernels: launched 2, started 2, finished 1, pending 1",
                "    last launched: helloWorld x1, wait event 4 passes 4, completion event 5 set 10",
                "    last finished: helloWorld x1, wait none, completion none",
                "process 8 (other): doca_dpa on mlx5_2, app -, created",
                "  kernels: launched 0, started 0, finished 0, pending 0"), DocaObjects.format(List.of(STARTED, CREATED), null));
    }

    @Test
    void aPidSelectsItsProcessAndNoneSaysSo() {
        DocaObjects cmd = new DocaObjects(() -> List.of(STARTED, CREATED));
        assertTrue(cmd.doca("8").startsWith("process 8 (other)") && !cmd.doca("8").contains("process 7"), cmd.doca("8"));
        assertEquals("no DOCA DPA context in process 9", cmd.doca(9));
        assertEquals("no DOCA DPA context in any process", new DocaObjects(List::of).doca());
        UsageException e = assertThrows(UsageException.class, () -> cmd.doca("x"));
        assertTrue(e.getMessage().contains("x is no process id"), e.getMessage());
        assertThrows(UsageException.class, () -> cmd.doca(1, 2));
    }
}
