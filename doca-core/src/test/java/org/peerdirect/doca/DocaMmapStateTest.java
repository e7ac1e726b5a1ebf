package org.peerdirect.doca;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * doca_mmap's state rules as {@code doca_mmap.h} states them, against random call sequences: a
 * small reference model predicts each call's status and the real map must answer the same. Two
 * devices of one process (the lab is shared by the tries: a map's state is its own, and each try
 * ends with the map destroyed and nothing of the process pinned).
 */
class DocaMmapStateTest {

    static final int LEN = 1 << 15;
    static final int RW_RDMA = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;

    static Path dir;
    static DocaLab lab;
    static AddressSpace proc;
    static DocaDev[] dev;
    static long buf;

    @BeforeContainer
    static void up() throws IOException {
        dir = Files.createTempDirectory("doca-mmap-state");
        lab = new DocaLab(dir, 2);
        proc = lab.process("mmap-states");
        dev = new DocaDev[] {lab.open(proc, 0), lab.open(proc, 1)};
        buf = proc.mmap(LEN);
        proc.populate(buf, LEN, true);
    }

    @AfterContainer
    static void down() throws IOException {
        try {
            dev[0].close();
            dev[1].close();
            lab.close();
        } finally {
            Files.deleteIfExists(dir.resolve("swap"));
            Files.deleteIfExists(dir);
        }
    }

    /** The reference: what the header says each call answers in each state. */
    static final class Model {
        boolean destroyed;
        boolean memrange;
        boolean started;
        boolean everStarted;
        boolean exported;
        boolean rdma;
        int max = DocaMmap.DEFAULT_MAX_NUM_DEVICES;
        final List<Integer> devs = new ArrayList<>();

        DocaError apply(int op) {
            if (destroyed) {
                return DocaError.DOCA_ERROR_INVALID_VALUE;
            }
            switch (op) {
                case 0 -> { // set_memrange
                    if (started) {
                        return DocaError.DOCA_ERROR_BAD_STATE;
                    }
                    if (memrange) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    memrange = true;
                }
                case 1, 2, 3 -> { // set_permissions: RDMA, local only, an undefined bit
                    if (started) {
                        return DocaError.DOCA_ERROR_BAD_STATE;
                    }
                    if (op == 3) {
                        return DocaError.DOCA_ERROR_INVALID_VALUE;
                    }
                    rdma = op == 1;
                }
                case 4, 5 -> { // add_dev
                    if (started) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    if (devs.contains(op - 4)) {
                        return DocaError.DOCA_ERROR_ALREADY_EXIST;
                    }
                    if (devs.size() >= max) {
                        return DocaError.DOCA_ERROR_NO_MEMORY;
                    }
                    devs.add(op - 4);
                }
                case 6, 7 -> { // rm_dev
                    if (started) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    if (!devs.remove((Integer) (op - 6))) {
                        return DocaError.DOCA_ERROR_NOT_FOUND;
                    }
                }
                case 8 -> { // start
                    if (started || !memrange) {
                        return DocaError.DOCA_ERROR_BAD_STATE;
                    }
                    started = true;
                    everStarted = true;
                }
                case 9 -> { // stop
                    if (exported) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    if (!started) {
                        return DocaError.DOCA_ERROR_BAD_STATE;
                    }
                    started = false;
                }
                case 10, 11 -> { // export_rdma through dev 0 / 1
                    if (!started) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    if (!devs.contains(op - 10)) {
                        return DocaError.DOCA_ERROR_NOT_FOUND;
                    }
                    if (!rdma) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    exported = true;
                }
                case 12 -> { // set_max_num_devices(1)
                    if (everStarted) {
                        return DocaError.DOCA_ERROR_NOT_PERMITTED;
                    }
                    if (devs.size() > 1) {
                        return DocaError.DOCA_ERROR_INVALID_VALUE;
                    }
                    max = 1;
                }
                case 13 -> { // get_memrange
                    if (!memrange) {
                        return DocaError.DOCA_ERROR_BAD_STATE;
                    }
                }
                default -> destroyed = true; // 14: destroy
            }
            return DocaError.DOCA_SUCCESS;
        }
    }

    static DocaError call(DocaMmap m, int op) {
        return DocaDevTest.status(() -> {
            switch (op) {
                case 0 -> m.setMemrange(buf, LEN);
                case 1 -> m.setPermissions(RW_RDMA);
                case 2 -> m.setPermissions(DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE);
                case 3 -> m.setPermissions(1 << 12);
                case 4, 5 -> m.addDev(dev[op - 4]);
                case 6, 7 -> m.rmDev(dev[op - 6]);
                case 8 -> m.start();
                case 9 -> m.stop();
                case 10, 11 -> m.exportRdma(dev[op - 10]);
                case 12 -> m.setMaxNumDevices(1);
                case 13 -> m.getMemrange();
                default -> m.destroy();
            }
        });
    }

    @Property
    void everyCallAnswersWhatTheHeaderSays(@ForAll @Size(max = 40) List<@IntRange(min = 0, max = 14) Integer> ops) {
        DocaMmap m = DocaMmap.create();
        Model ref = new Model();
        List<String> trace = new ArrayList<>();
        try {
            for (int op : ops) {
                DocaError want = ref.apply(op);
                DocaError got = call(m, op);
                trace.add(op + "=" + got);
                assertEquals(want, got, "call " + op + " after " + trace);
            }
        } finally { // a failed try leaves nothing to the next ones (the lab is shared)
            call(m, 14);
        }
        assertEquals(0, proc.pinnedPages(), "destroy left the range registered after " + trace);
    }
}
