package org.peerdirect.gpu.nvidia.impl;

import java.util.HexFormat;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.BoundDevices;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * Gogo commands for the GPUs, part of {@code nvidia.ko}'s bundle (they stay while
 * nvidia-peermem comes and goes): {@code gpu:smi} (an nvidia-smi view: memory, BAR1 use, pinned
 * ranges; the nv_mem clients are {@code peermem:clients}' and {@code kernel:lsmod}'s), {@code gpu:alloc <pid> <size>} (cudaMalloc into a process),
 * {@code gpu:free <pid> <addr>} (cudaFree: registrations over it are invalidated by the free
 * callback, or keep their pages with the persistent client), {@code gpu:memcpy} (cudaMemcpy).
 */
@Component(service = GpuCommands.class, property = {"osgi.command.scope=gpu", "osgi.command.function=smi", "osgi.command.function=alloc",
        "osgi.command.function=free", "osgi.command.function=memcpy"})
public final class GpuCommands {

    private final Mm mm;
    /** The GPUs by index (dynamic: the commands stay while GPUs come and go). */
    private final BoundDevices<NvidiaRm> gpus = new BoundDevices<>(NvidiaRm::index);

    @Activate
    public GpuCommands(@Reference Mm mm) {
        this.mm = mm;
    }

    @Reference(cardinality = org.osgi.service.component.annotations.ReferenceCardinality.MULTIPLE,
            policy = org.osgi.service.component.annotations.ReferencePolicy.DYNAMIC, unbind = "removeGpu")
    void addGpu(NvidiaRm rm) {
        gpus.add(rm);
    }

    void removeGpu(NvidiaRm rm) {
        gpus.remove(rm);
    }

    @Descriptor("the GPUs as nvidia-smi shows them: memory, BAR1, pinned ranges, modelled pin time")
    public String smi() {
        StringBuilder sb = new StringBuilder();
        if (gpus.isEmpty()) {
            return "No devices were found";
        }
        for (NvidiaRm rm : gpus.all()) {
            NvidiaRm.Smi s = rm.smi();
            sb.append(String.format("GPU %d: %s (%s)%n", rm.index(), s.name(), s.bdf()));
            sb.append(String.format("    FB Memory Usage     : %d MiB used / %d MiB total (%d MiB of host memory committed)%n", s.usedBytes() >> 20,
                    s.vramBytes() >> 20, s.committedBytes() >> 20));
            sb.append(String.format("    BAR1 Memory Usage   : %d MiB used / %d MiB total (%d KiB)%n", s.bar1UsedBytes() >> 20, s.bar1Bytes() >> 20,
                    s.bar1UsedBytes() >> 10));
            sb.append(String.format("    Allocations         : %d, pinned for peers: %d, orphaned by free (persistent pins): %d KiB%n", s.allocations(),
                    s.pinnedTables(), s.orphanBytes() >> 10));
            sb.append(String.format("    P2P pins            : %d, modelled pin time %.3f ms (not slept), free callbacks %d%n", s.pins(),
                    s.modelledPinNanos() / 1e6, s.freeCallbacks()));
            sb.append(String.format("    dma-buf exports     : %d, mapped by %d importer attachment(s)%n", s.dmabufs(), s.dmabufMappings()));
            sb.append(String.format("    Driver memory       : DMA pages live %d (command and message queues, copy staging)%n", s.dmaPages()));
            for (String p : s.pinned()) {
                sb.append("      ").append(p).append('\n');
            }
        }
        return sb.toString().stripTrailing();
    }

    @Descriptor("cudaMalloc on GPU 0 into a process; prints the device pointer. Example: d = (gpu:alloc $pid 1M)")
    public String alloc(@Descriptor("process id") String pid, @Descriptor("bytes (K/M/G suffixes), rounded up to 64 KiB") String bytes) {
        return alloc(pid, bytes, "0");
    }

    @Descriptor("cudaSetDevice then cudaMalloc: on the GPU of that index (gpu:smi lists them). Example: d = (gpu:alloc $pid 1M 1)")
    public String alloc(@Descriptor("process id") String pid, @Descriptor("bytes (K/M/G suffixes), rounded up to 64 KiB") String bytes,
            @Descriptor("GPU index") String gpu) {
        AddressSpace p = process("gpu:alloc", pid);
        long size = Args.size("gpu:alloc", "the size", bytes, 1, 64L << 30);
        NvidiaRm rm = NvidiaRm.device(gpus.all(), (int) Args.integer("gpu:alloc", "the GPU index", gpu, 0, 63));
        return String.format("0x%x", rm.cuMemAlloc(p, size));
    }

    @Descriptor("cudaFree: registrations over the buffer get the free callback (invalidating nv_mem) or keep its pages until dereg (persistent)")
    public String free(@Descriptor("process id") String pid, @Descriptor("the device pointer gpu:alloc printed") String addr) {
        AddressSpace p = process("gpu:free", pid);
        long a = Args.address("gpu:free", addr);
        owner(p, a, 1, "cuMemFree").cuMemFree(p, a);
        return "freed " + addr;
    }

    @Descriptor("cudaMemcpy: 'htod <pid> <dst> <byte> <len>' fills with a byte, 'dtoh <pid> <src> <len>' dumps (first 64 bytes and a checksum), 'dtod <pid> <dst> <src> <len>'")
    public String memcpy(@Descriptor("htod | dtoh | dtod, then its arguments") String... args) {
        if (args.length < 1) {
            throw new UsageException("gpu:memcpy: give a direction: htod <pid> <dst> <byte> <len> | dtoh <pid> <src> <len> | dtod <pid> <dst> <src> <len>");
        }
        switch (args[0]) {
            case "htod" -> {
                need(args, 5, "htod <pid> <dst> <byte> <len>");
                AddressSpace p = process("gpu:memcpy", args[1]);
                int len = (int) Args.size("gpu:memcpy", "the length", args[4], 1, 1 << 30);
                byte[] b = new byte[len];
                java.util.Arrays.fill(b, (byte) Args.integer("gpu:memcpy", "the byte value", args[3], 0, 255));
                long dst = Args.address("gpu:memcpy", args[2]);
                owner(p, dst, len, "cuMemcpyHtoD").cuMemcpyHtoD(p, dst, b, 0, len);
                return "copied " + len + " bytes host to device";
            }
            case "dtoh" -> {
                need(args, 4, "dtoh <pid> <src> <len>");
                AddressSpace p = process("gpu:memcpy", args[1]);
                int len = (int) Args.size("gpu:memcpy", "the length", args[3], 1, 1 << 30);
                byte[] b = new byte[len];
                long src = Args.address("gpu:memcpy", args[2]);
                owner(p, src, len, "cuMemcpyDtoH").cuMemcpyDtoH(p, b, 0, src, len);
                java.util.zip.CRC32 crc = new java.util.zip.CRC32();
                crc.update(b);
                return String.format("%s%s%ncrc32 %08x over %d bytes", HexFormat.ofDelimiter(" ").formatHex(b, 0, Math.min(64, len)),
                        len > 64 ? " ..." : "", crc.getValue(), len);
            }
            case "dtod" -> {
                need(args, 5, "dtod <pid> <dst> <src> <len>");
                AddressSpace p = process("gpu:memcpy", args[1]);
                long len = Args.size("gpu:memcpy", "the length", args[4], 1, 1L << 34);
                long dst = Args.address("gpu:memcpy", args[2]);
                long src = Args.address("gpu:memcpy", args[3]);
                NvidiaRm to = owner(p, dst, len, "cuMemcpyDtoD");
                NvidiaRm from = owner(p, src, len, "cuMemcpyDtoD");
                if (to != from) { // cudaMemcpyPeer without P2P between the GPUs: staged through the host
                    byte[] stage = new byte[Math.toIntExact(len)];
                    from.cuMemcpyDtoH(p, stage, 0, src, stage.length);
                    to.cuMemcpyHtoD(p, dst, stage, 0, stage.length);
                    return "copied " + len + " bytes device to device (GPU " + from.index() + " to GPU " + to.index() + ", through the host)";
                }
                to.cuMemcpyDtoD(p, dst, src, len);
                return "copied " + len + " bytes device to device";
            }
            default -> throw new UsageException("gpu:memcpy: direction '" + args[0] + "' is not htod, dtoh or dtod");
        }
    }

    private static void need(String[] args, int n, String usage) {
        if (args.length != n) {
            throw new UsageException("gpu:memcpy " + usage + ": " + (args.length - 1) + " argument(s) given");
        }
    }

    /** The GPU whose allocation holds the range (unified addresses), as the CUDA driver finds it. */
    private NvidiaRm owner(AddressSpace p, long va, long len, String what) {
        if (gpus.isEmpty()) {
            throw new KernelException(Errno.ENODEV, "no GPU (gpu:smi shows none; configuration org.peerdirect.gpu gpus=0?)");
        }
        return NvidiaRm.owner(gpus.all(), p.pid(), va, len, what);
    }

    private AddressSpace process(String cmd, String pid) {
        return Args.process(mm, cmd, pid);
    }
}
