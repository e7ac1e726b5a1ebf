package org.peerdirect.umemtest;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * The test DMA device {@code umem_test0} and its Gogo commands: {@code umemtest:reg <pid> <addr>
 * <bytes>} (registers with LOCAL_WRITE|REMOTE_READ|REMOTE_WRITE, prints the MR id),
 * {@code umemtest:dma <mr>} (the device writes a pattern over the MR and reads it back),
 * {@code umemtest:dereg <mr>}, {@code umemtest:list}. Stopping ib-core deregisters its MRs.
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = UmemTestCommands.class, property = {"osgi.command.scope=umemtest", "osgi.command.function=reg",
        "osgi.command.function=dereg", "osgi.command.function=dma", "osgi.command.function=list"})
public final class UmemTestCommands {

    private final Mm mm;
    private final UmemTestDevice device;

    @Activate
    public UmemTestCommands(@Reference Mm mm, @Reference Iommu iommu, @Reference UmemService umems) {
        this.mm = mm;
        this.device = new UmemTestDevice("umem_test0", iommu, umems);
    }

    @Deactivate
    void deactivate() {
        device.close();
    }

    @Descriptor("registers a range of a process's memory with the test DMA device (pinned or peer path); prints the MR id. Example: mr = (umemtest:reg $pid $a 64K)")
    public int reg(@Descriptor("process id") String pid, @Descriptor("start address") String addr,
            @Descriptor("length in bytes (K/M/G suffixes)") String bytes) {
        AddressSpace as = Args.process(mm, "umemtest:reg", pid);
        return device.reg(as, Args.address("umemtest:reg", addr), Args.size("umemtest:reg", "the length", bytes, 1, 1L << 46),
                IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE).id();
    }

    @Descriptor("deregisters an MR of the test device")
    public String dereg(@Descriptor("MR id (umemtest:list)") String id) {
        device.dereg(mr("umemtest:dereg", id));
        return "deregistered mr " + id;
    }

    private UmemTestDevice.Mr mr(String command, String id) {
        int n = (int) Args.integer(command, "an MR id", id, 0, Integer.MAX_VALUE);
        try {
            return device.mr(n);
        } catch (RuntimeException e) {
            throw new UsageException(command + ": no MR " + n + " on " + device.name() + " (umemtest:list lists them)");
        }
    }

    @Descriptor("the device writes a pattern over the whole MR and reads it back through the IOMMU")
    public String dma(@Descriptor("MR id (umemtest:list)") String mrId) {
        UmemTestDevice.Mr mr = mr("umemtest:dma", mrId);
        int id = mr.id();
        long len = mr.umem().length();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(len);
            MemorySegment in = a.allocate(len);
            for (long i = 0; i < len; i++) {
                out.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + id));
            }
            try {
                mr.dmaWrite(mr.umem().address(), out, 0, len);
                mr.dmaRead(mr.umem().address(), in, 0, len);
            } catch (UmemTestDevice.DmaRefused e) {
                return "DMA refused: " + e.getMessage();
            }
            long bad = out.mismatch(in);
            return bad < 0 ? "DMA ok: wrote and read back " + len + " bytes through the IOMMU" : "DMA MISMATCH at byte " + bad;
        }
    }

    @Descriptor("the MRs of the test DMA device")
    public String list() {
        List<String> out = new ArrayList<>();
        for (UmemTestDevice.Mr mr : device.mrs()) {
            out.add(mr.toString());
        }
        return out.isEmpty() ? "(no MRs on " + device.name() + ")" : String.join("\n", out);
    }
}
