package org.peerdirect.doca;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE;
import static org.peerdirect.doca.DocaAccessFlag.DOCA_ACCESS_FLAG_PCI_READ_ONLY;
import static org.peerdirect.doca.DocaAccessFlag.DOCA_ACCESS_FLAG_PCI_READ_WRITE;
import static org.peerdirect.doca.DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_ATOMIC;
import static org.peerdirect.doca.DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;
import static org.peerdirect.doca.DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;
import static org.peerdirect.doca.DocaDevTest.status;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.mmap.MmapExportDesc;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * doca_mmap: its state rules, the permissions the device enforces through the MR it registers, and
 * the export → import round trip between two hosts (two processes on two BlueField-3 models)
 * reaching the exporter's memory by RDMA.
 */
class DocaMmapTest {

    static final int LEN = 1 << 16;

    @TempDir
    Path tmp;
    DocaLab lab;
    AddressSpace hostA;
    AddressSpace hostB;
    DocaDev devA;
    DocaDev devB;
    long bufA;

    @BeforeEach
    void up() {
        lab = new DocaLab(tmp, 2);
        hostA = lab.process("host-a");
        hostB = lab.process("host-b");
        devA = lab.open(hostA, 0);
        devB = lab.open(hostB, 1);
        bufA = hostA.mmap(LEN);
        hostA.populate(bufA, LEN, true);
    }

    @AfterEach
    void down() {
        try {
            devA.close();
            devB.close();
        } finally {
            lab.close();
        }
    }

    DocaMmap started(int permissions) {
        DocaMmap m = DocaMmap.create();
        m.setMemrange(bufA, LEN);
        m.setPermissions(permissions);
        m.addDev(devA);
        m.start();
        return m;
    }

    @Test
    void settersAfterStartAreBadStateAndStartWithoutARangeIsBadState() {
        DocaMmap m = DocaMmap.create();
        m.addDev(devA);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(m::start), "start without a memory range");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(m::getMemrange), "get_memrange before it was set");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> m.setMemrange(bufA, 0)));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> m.setMemrange(-4096, 8192)), "a range that wraps");
        m.setMemrange(bufA, LEN);
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> m.setMemrange(bufA, 4096)), "the range is set once");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> m.setPermissions(1 << 9)), "an undefined flag");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> m.setPermissions(DOCA_ACCESS_FLAG_PCI_READ_ONLY | DOCA_ACCESS_FLAG_PCI_READ_WRITE)));
        assertEquals(DocaError.DOCA_ERROR_ALREADY_EXIST, status(() -> m.addDev(devA)));
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> m.exportRdma(devA)), "export before start");
        m.start();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> m.setPermissions(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE)));
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> m.setMemrange(bufA, LEN)));
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> m.setUserData(7)));
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(m::start), "start twice");
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> m.addDev(devB)));
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> m.rmDev(devA)));
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> m.setMaxNumDevices(4)));
        assertEquals(new DocaMmap.Memrange(bufA, LEN), m.getMemrange());
        // stop: configurable again (but the range); start again registers anew
        assertEquals(LEN / 4096, hostA.pinnedPages(), "start registered (pinned) the range");
        m.stop();
        assertEquals(0, hostA.pinnedPages(), "stop deregistered it");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(m::stop), "stop of a stopped map");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> m.rkey(devA)), "no key while stopped");
        m.setPermissions(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DOCA_ACCESS_FLAG_RDMA_WRITE);
        m.start();
        assertEquals(LEN / 4096, hostA.pinnedPages(), "a second start registers anew");
        assertNotEquals(0, m.rkey(devA));
        m.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(m::destroy), "double destroy");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(m::start));
    }

    @Test
    void devicesAreBoundedAndRemovable() {
        DocaMmap m = DocaMmap.create();
        m.setMaxNumDevices(1);
        m.addDev(devA);
        DocaDev devA2 = lab.open(hostA, 1);
        assertEquals(DocaError.DOCA_ERROR_NO_MEMORY, status(() -> m.addDev(devA2)), "past the maximum number of devices");
        assertEquals(DocaError.DOCA_ERROR_NOT_FOUND, status(() -> m.rmDev(devA2)));
        m.rmDev(devA);
        m.addDev(devA2);
        m.setMemrange(bufA, LEN);
        m.start();
        assertEquals(DocaError.DOCA_ERROR_NOT_FOUND, status(() -> m.exportRdma(devA)), "export through a device not in the map");
        m.destroy();
        devA2.close();
    }

    @Test
    void devicesOfTwoProcessesInOneMapAndUnmappedRangesDoNotStart() {
        DocaMmap m = DocaMmap.create();
        m.setMemrange(bufA, LEN);
        m.addDev(devA);
        m.addDev(devB);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(m::start));
        m.destroy();
        DocaMmap u = DocaMmap.create();
        u.setMemrange(bufA + (64L << 20), LEN);
        u.addDev(devA);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(u::start), "a range with nothing mapped");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> u.lkey(devA)), "nothing registered after a failed start");
        u.destroy();
    }

    @Test
    void theDpaFormsWaitForFlexio() {
        DocaDpaContext dpa = () -> devA;
        DocaMmap m = DocaMmap.create();
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> m.setDpaMemrange(dpa, 0x1000, 4096)));
        m.setMemrange(bufA, LEN);
        m.addDev(devA);
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> m.devGetDpaHandle(devA)), "not started");
        m.start();
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> m.devGetDpaHandle(devA)));
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> m.setDpaMemrange(dpa, 0x1000, 4096)));
        m.destroy();
    }

    @Test
    void anRdmaExportIsReachedByRdmaFromTheOtherHost() {
        DocaMmap m = started(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DOCA_ACCESS_FLAG_RDMA_READ | DOCA_ACCESS_FLAG_RDMA_WRITE
                | DOCA_ACCESS_FLAG_RDMA_ATOMIC);
        assertEquals(IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC,
                DocaAccessFlag.toIbAccess(m.getPermissions()));
        assertEquals(IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE, DocaAccessFlag.toIbAccess(DOCA_ACCESS_FLAG_RDMA_WRITE),
                "[model] the verbs need local write beside remote write");
        byte[] desc = m.exportRdma(devA);
        assertTrue(m.getExported());
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(m::stop), "an exported map is destroyed, not stopped");
        DocaMmap r = DocaMmap.createFromExport(99, desc, devB);
        assertTrue(r.getFromExport());
        assertEquals(99, r.getUserData());
        assertEquals(new DocaMmap.Memrange(bufA, LEN), r.getMemrange());
        assertEquals(m.rkey(devA), r.remoteKey());
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> r.exportRdma(devB)), "an import is not exported again");
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> r.addDev(devB)));
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> r.setPermissions(0)));
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(r::start));
        try (DocaLab.End a = new DocaLab.End(devA); DocaLab.End b = new DocaLab.End(devB)) {
            b.connect(a);
            byte[] data = DocaLab.fill(hostB, b.buf, 8192, 5);
            IbvWc w = b.post(IbvWrOpcode.RDMA_WRITE, 8192, r.getMemrange().addr() + 4096, r.remoteKey(), 0);
            assertEquals(IbvWcStatus.SUCCESS, w.status, w.toString());
            assertArrayEquals(data, DocaLab.read(hostA, bufA + 4096, 8192), "B's RDMA WRITE landed in A's range");
            DocaLab.fill(hostA, bufA + 40_000, 512, 9);
            IbvWc rd = b.post(IbvWrOpcode.RDMA_READ, 512, bufA + 40_000, r.remoteKey(), 0);
            assertEquals(IbvWcStatus.SUCCESS, rd.status, rd.toString());
            assertArrayEquals(DocaLab.read(hostA, bufA + 40_000, 512), DocaLab.read(hostB, b.buf, 512));
            hostA.writeLong(bufA + 128, 40);
            IbvWc fa = b.post(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, 8, bufA + 128, r.remoteKey(), 2);
            assertEquals(IbvWcStatus.SUCCESS, fa.status, fa.toString());
            assertEquals(42, hostA.readLong(bufA + 128));
        }
        r.destroy();
        m.destroy();
    }

    @Test
    void theDeviceEnforcesTheMapsPermissions() {
        DocaMmap ro = started(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DOCA_ACCESS_FLAG_RDMA_READ);
        DocaMmap r = DocaMmap.createFromExport(0, ro.exportRdma(devA), devB);
        byte[] before = DocaLab.fill(hostA, bufA, 4096, 3);
        try (DocaLab.End a = new DocaLab.End(devA); DocaLab.End b = new DocaLab.End(devB)) {
            b.connect(a);
            IbvWc rd = b.post(IbvWrOpcode.RDMA_READ, 4096, bufA, r.remoteKey(), 0);
            assertEquals(IbvWcStatus.SUCCESS, rd.status, "RDMA_READ is granted: " + rd);
            assertArrayEquals(before, DocaLab.read(hostB, b.buf, 4096));
            DocaLab.fill(hostB, b.buf, 4096, 77);
            IbvWc w = b.post(IbvWrOpcode.RDMA_WRITE, 4096, bufA, r.remoteKey(), 0);
            assertEquals(IbvWcStatus.REM_ACCESS_ERR, w.status, "a read-only export refuses an RDMA WRITE: " + w);
        }
        assertArrayEquals(before, DocaLab.read(hostA, bufA, 4096), "nothing of the refused write landed");
        r.destroy();
        ro.destroy();
        DocaMmap local = started(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE);
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> local.exportRdma(devA)), "no RDMA permission, no RDMA export");
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> local.exportPci(devA)), "no PCI permission, no PCI export");
        local.destroy();
    }

    @Test
    void destroyDeregistersSoTheExportedKeyIsDead() {
        DocaMmap m = started(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DOCA_ACCESS_FLAG_RDMA_READ);
        DocaMmap r = DocaMmap.createFromExport(0, m.exportRdma(devA), devB);
        m.destroy();
        try (DocaLab.End a = new DocaLab.End(devA); DocaLab.End b = new DocaLab.End(devB)) {
            b.connect(a);
            IbvWc rd = b.post(IbvWrOpcode.RDMA_READ, 64, bufA, r.remoteKey(), 0);
            assertEquals(IbvWcStatus.REM_ACCESS_ERR, rd.status, "the exporter's MR is gone: " + rd);
        }
        r.destroy();
        assertEquals(0, hostA.pinnedPages(), "destroy unpinned the range");
    }

    @Test
    void pciExportsImportOnTheSameDeviceOnlyAndBadDescriptorsAreInvalid() {
        DocaMmap m = started(DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DOCA_ACCESS_FLAG_PCI_READ_WRITE);
        assertTrue(DocaMmap.capIsExportPciSupported(devA.asDevinfo()));
        byte[] pci = m.exportPci(devA);
        assertEquals(DocaError.DOCA_ERROR_NOT_PERMITTED, status(() -> DocaMmap.createFromExport(0, pci, devB)), "another device");
        AddressSpace hostA2 = lab.process("host-a-peer");
        DocaDev devA2 = lab.open(hostA2, 0);
        DocaMmap r = DocaMmap.createFromExport(0, pci, devA2);
        assertEquals(m.lkey(devA), r.remoteKey());
        assertEquals(MmapExportDesc.KIND_PCI, MmapExportDesc.parse(pci).kind());
        r.destroy();
        devA2.close();

        byte[] bad = pci.clone();
        bad[0] ^= 1;
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaMmap.createFromExport(0, bad, devB)), "magic");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaMmap.createFromExport(0, new byte[12], devB)), "length");
        byte[] wraps = pci.clone();
        ByteBuffer.wrap(wraps).order(ByteOrder.LITTLE_ENDIAN).putLong(16, -4096).putLong(24, 8192);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaMmap.createFromExport(0, wraps, devB)), "a range that wraps");
        m.destroy();
        assertFalse(m.toString().isEmpty());
    }
}
