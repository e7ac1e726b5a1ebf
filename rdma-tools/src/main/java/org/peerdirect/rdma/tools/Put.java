package org.peerdirect.rdma.tools;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * {@code rdma:put --mem CLIENT [--offset OFF] --text TEXT [--flush]} (a peerdirect tool): one RDMA
 * WRITE of the text from a host buffer into peer memory at a fixed device offset (an SSD's
 * persistent region: the same offset names the same bytes after a restart), then, with
 * {@code --flush}, an IBA 1.5 RDMA FLUSH with the persistent placement type over the written range
 * (the target MR carries IB_ACCESS_FLUSH_PERSISTENT, granted over persistent memory only), then an
 * RDMA READ back to check placement.
 */
final class Put {

    static final String DESCRIPTION = "RDMA WRITE of a text into peer memory at a fixed device offset (--flush: then an RDMA FLUSH to persistence), "
            + "read back to check. Example: rdma:put --mem ssd_mem --offset 0 --text hello --flush";

    private final ToolEnv env;

    Put(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        Options o = new Options("rdma:put", "one RDMA WRITE of a text into peer memory at a device offset (then an RDMA READ back)", args, List.of(
                Options.value("--mem", "MEM", "a peer client offering memory at fixed offsets (ssd_mem)", null),
                Options.value("--offset", "OFF", "device offset, page-aligned", 0),
                Options.value("--text", "TEXT", "the bytes to write (UTF-8)", null),
                Options.flag("--flush", "after the write, an RDMA FLUSH (persistent placement) of the written range"),
                Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                DeviceLookup.serverOption()));
        if (o.help()) {
            return o.printUsage();
        }
        if (o.string("--mem") == null || o.string("--text") == null) {
            throw new UsageException("rdma:put needs --mem <peer client> and --text <text> (rdma:put --help)");
        }
        PeerMemoryAllocator mem = PeerMemory.resolve(env, o);
        if (mem == null) {
            throw new UsageException("rdma:put: --mem must name a peer memory client, not host");
        }
        long offset = o.number("--offset", 0, Long.MAX_VALUE / 2);
        byte[] text = o.string("--text").getBytes(StandardCharsets.UTF_8);
        if (text.length == 0 || text.length > (1 << 20)) {
            throw new UsageException("rdma:put: --text must have 1 to 1048576 bytes, not " + text.length);
        }
        long size = (text.length + 4095L) & -4096L;
        boolean flush = o.flag("--flush");
        DeviceLookup.Pair p = DeviceLookup.pair(env, o, DeviceLookup.Needs.NONE.caps(flush ? IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT : 0, 0));
        long bar0 = env.barBytes();
        int flushRights = flush ? IbAccess.FLUSH_GLOBAL | IbAccess.FLUSH_PERSISTENT : 0;
        try (Endpoint target = new Endpoint(env, "put-target", p.server(), size, 1, 4, mem, false, Buffers.Odp.NONE, offset, false, flushRights);
                Endpoint source = new Endpoint(env, "put-source", p.client(), size, 1, 4, null)) {
            Endpoint.connect(source, target, 0);
            Endpoint.connect(target, source, 0);
            source.write(source.buf, text, 0, text.length);
            IbvSendWr w = new IbvSendWr().sge(source.buf, text.length, source.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = target.buf;
            w.rkey = target.mr.rkey();
            Completions.complete(source, w, "RDMA WRITE");
            String flushed = flush ? flush(source, target, text.length, mem) : "";
            source.write(source.buf, new byte[text.length], 0, text.length);
            w.opcode = IbvWrOpcode.RDMA_READ;
            Completions.complete(source, w, "RDMA READ");
            byte[] back = new byte[text.length];
            source.read(source.buf, back, 0, text.length);
            boolean same = Arrays.equals(back, text);
            long bar = env.barBytes();
            String out = String.format("%s %s: RDMA WRITE of %d bytes to %s offset 0x%x (pid %d 0x%x, rkey 0x%x): SUCCESS%n"
                    + "%sRDMA READ back: %s%s%n", p.client().name(), p.server().name(), text.length, mem.name(), offset, target.proc.pid(),
                    target.buf, target.mr.rkey(), flushed, same ? "the same bytes" : "MISMATCH",
                    bar < 0 ? "" : String.format(" (%d bytes crossed the peer's BAR)", bar - bar0));
            if (!same) {
                throw new IllegalStateException(out);
            }
            return out;
        }
    }

    /** The RDMA FLUSH (placement PERSISTENT, level RANGE) of the {@code len} written bytes; the line it prints. */
    private static String flush(Endpoint source, Endpoint target, int len, PeerMemoryAllocator mem) {
        IbvSendWr f = new IbvSendWr();
        f.opcode = IbvWrOpcode.FLUSH;
        f.sendFlags = IbvSendWr.SEND_SIGNALED;
        f.remoteAddr = target.buf;
        f.rkey = target.mr.rkey();
        f.flushLength = len;
        f.flushType = IbvSendWr.FLUSH_PERSISTENT;
        f.flushLevel = IbvSendWr.FLUSH_RANGE;
        Completions.complete(source, f, "RDMA FLUSH");
        return String.format("RDMA FLUSH (placement PERSISTENT, level RANGE) of the %d bytes: SUCCESS: durable in %s%n", len, mem.name());
    }
}
