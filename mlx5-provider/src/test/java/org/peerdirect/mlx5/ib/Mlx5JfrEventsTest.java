package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvWcStatus;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * The JFR events a dma-buf MR's life on mlx5 shows: the exporter's move ({@code org.peerdirect.DmabufMoveNotify},
 * ib-core), the device page fault that maps the buffer again ({@code org.peerdirect.Mlx5PageFault}), and the
 * firmware commands around it ({@code org.peerdirect.Mlx5Command}), each with its fields.
 */
class Mlx5JfrEventsTest extends Mlx5Machine {

    @TempDir
    Path tmp;
    GpuBoard board;
    NvidiaRm rm;

    @AfterEach
    void down() {
        if (rm == null) {
            return;
        }
        List<String> gpuLeft = rm.shutdown();
        List<String> left = stopMachine();
        board.close();
        assertEquals(List.of(), gpuLeft, "no video memory or BAR1 slot held");
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }

    private static List<RecordedEvent> named(List<RecordedEvent> all, String name) {
        return all.stream().filter(e -> e.getEventType().getName().equals(name)).toList();
    }

    @Test
    void aMoveThenAFaultThenCommandsAreRecordedWithTheirFields() throws Exception {
        Path file = tmp.resolve("mlx5.jfr");
        long iova = 0x7f00_0000_0000L;
        int rkey;
        try (Recording r = new Recording()) {
            r.enable("org.peerdirect.DmabufMoveNotify");
            r.enable("org.peerdirect.Mlx5PageFault");
            r.enable("org.peerdirect.Mlx5Command");
            r.start();
            startMachine(tmp, "jfr-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
            board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
            rm = new NvidiaRm(mm, bus.register(board.spec()), 0);
            RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
            connect(p);
            long dptr = rm.cuMemAlloc(proc, 1 << 20);
            int fd = rm.cuMemGetHandleForAddressRange(proc, dptr, 1 << 20);
            IbvMr dmr = p[1].pd.regDmabufMr(0, 1 << 20, iova, fd, RW);
            rkey = dmr.rkey();
            assertEquals(16, rm.dmaBufEvictBar1(proc, fd), "move_notify: the importer unmapped");
            p[0].qp.postSend(write(p[0], p[0].buf, 4096, iova + 8192, dmr.rkey()));
            assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status, "the write faulted the buffer back in");
            dmr.dereg();
            proc.close(fd);
            rm.cuMemFree(proc, dptr);
            p[0].close();
            p[1].close();
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> all = RecordingFile.readAllEvents(file);

        List<RecordedEvent> moves = named(all, "org.peerdirect.DmabufMoveNotify");
        assertEquals(1, moves.size(), moves.toString());
        RecordedEvent m = moves.getFirst();
        assertEquals(0, m.getLong("offset"));
        assertEquals(1 << 20, m.getLong("length"));
        assertFalse(m.getBoolean("pinned"), "a dynamic import");
        assertTrue(m.getString("dmabuf") != null && !m.getString("dmabuf").isEmpty());

        List<RecordedEvent> faults = named(all, "org.peerdirect.Mlx5PageFault");
        assertEquals(1, faults.size(), faults.toString());
        RecordedEvent f = faults.getFirst();
        assertEquals(ibs.get(1).name(), f.getString("device"));
        assertEquals("RDMA", f.getString("subtype"), "the responder's fault on the incoming write");
        assertEquals(rkey, f.getInt("key"));
        assertEquals(iova + 8192, f.getLong("address"));
        assertTrue(f.getBoolean("resolved"));
        assertTrue(f.getDuration().toNanos() > 0, "the fault's service time");

        List<RecordedEvent> cmds = named(all, "org.peerdirect.Mlx5Command");
        assertTrue(cmds.stream().anyMatch(c -> c.getString("opcode").equals("PAGE_FAULT_RESUME") && c.getString("device").equals(ibs.get(1).name())
                && c.getInt("status") == 0), "the resume is a command: " + cmds.size() + " commands");
        assertTrue(cmds.stream().anyMatch(c -> c.getString("opcode").equals("ENABLE_HCA")), "the bring-up is recorded");
        assertTrue(cmds.stream().allMatch(c -> c.getLong("latency") >= 0 && c.getString("error") == null), "no command failed");
    }
}
