package org.peerdirect.rdma.tools;

import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * The {@code --mem} option of every tool that moves data: {@code host} (the default), a peer
 * memory client's name, or {@code client:device} (a GPU index, as {@code perftest --use_cuda=<index>}).
 */
final class PeerMemory {

    private PeerMemory() {
    }

    /** The option as every tool declares it (read back by {@link #resolve}). */
    static Options.Opt option() {
        return Options.value("--mem", "MEM", "memory: host, a peer client (peermem:clients), or client:device (nv_mem:1: GPU 1)", "host");
    }

    /**
     * {@code --mem host | <client> | <client>:<device>}: null for host memory, else the peer
     * client's memory, on device 0 or on the device named.
     */
    static PeerMemoryAllocator resolve(ToolEnv env, Options o) {
        String mem = o.string("--mem");
        if (mem.equals("host")) {
            return null;
        }
        int colon = mem.lastIndexOf(':');
        String name = colon > 0 ? mem.substring(0, colon) : mem;
        int device = colon > 0 ? (int) Args.integer(o.tool(), "the device index of --mem " + mem, mem.substring(colon + 1), 0, 1023) : 0;
        for (PeerMemoryAllocator a : env.allocators()) {
            if (a.name().equals(name)) {
                if (device >= a.devices()) {
                    throw new UsageException(o.tool() + ": --mem " + mem + ": " + name + " has " + a.devices() + " device(s), 0.."
                            + (a.devices() - 1));
                }
                return device == 0 ? a : new OnDevice(a, device);
            }
        }
        throw new IllegalArgumentException("--mem " + mem + ": no peer memory client of that name offers memory (have: host"
                + env.allocators().stream().map(a -> ", " + a.name() + (a.devices() > 1 ? "[:0.." + (a.devices() - 1) + "]" : ""))
                        .reduce("", String::concat) + ")");
    }

    /** A client's memory allocated on one of its devices; everything but the allocation goes by address. */
    private record OnDevice(PeerMemoryAllocator a, int device) implements PeerMemoryAllocator {
        @Override
        public String name() {
            return a.name();
        }

        @Override
        public int devices() {
            return a.devices();
        }

        @Override
        public long alloc(int pid, long size) {
            return a.alloc(pid, size, device);
        }

        @Override
        public long alloc(int pid, long size, int dev) {
            return a.alloc(pid, size, dev);
        }

        @Override
        public long map(int pid, long deviceOffset, long size) {
            return a.map(pid, deviceOffset, size);
        }

        @Override
        public int exportDmabuf(int pid, long addr, long size) {
            return a.exportDmabuf(pid, addr, size);
        }

        @Override
        public void free(int pid, long addr) {
            a.free(pid, addr);
        }

        @Override
        public void copyToDevice(AddressSpace proc, long addr, byte[] src, int off, int len) {
            a.copyToDevice(proc, addr, src, off, len);
        }

        @Override
        public void copyFromDevice(AddressSpace proc, long addr, byte[] dst, int off, int len) {
            a.copyFromDevice(proc, addr, dst, off, len);
        }
    }
}
