package org.peerdirect.flexio;

import static org.peerdirect.hca.cx4.ifc.DpaObj.OBJ_DPA_WINDOW;
import static org.peerdirect.hca.cx4.ifc.DpaObj.WINDOW_PD;
import static org.peerdirect.hca.cx4.ifc.DpaObj.WINDOW_PROCESS;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxUmem;

/**
 * {@code flexio_msg_stream}: device-to-host text ([model], DPA_MODEL.md §2.5). A ring in the host
 * process's memory (a page holding the producer index, then {@code dataBsize} bytes), pinned as a
 * DevX umem with an mkey of the process's PD and reached by the device through a window; a
 * descriptor in the heap names them for {@code flexio_dev_msg} (flexio-dev's {@code FlexioDevMsg},
 * which takes {@link #daddr} where the C call takes a stream id). {@link SyncMode#SYNC}: a host
 * thread prints each line as it arrives; {@link SyncMode#ASYNC}: lines wait for {@link #flush}, and
 * a ring the device laps loses the oldest bytes, counted in {@link #overruns} (best effort, as
 * DOCA's device log). BATCH and TRACER modes are not modelled.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_msg_stream_create, _flush, _destroy</a>
 */
public final class FlexioMsgStream implements AutoCloseable {

    /** {@code flexio_msg_stream_sync_mode} (SYNC, ASYNC). */
    public enum SyncMode {
        SYNC, ASYNC
    }

    /**
     * {@code struct flexio_msg_stream_attr_t}: data size (a power of two, at least 2 KiB), mode,
     * name, level ({@code flexio_msg_dev_level}: 0 no print .. 5 debug; a message passes when its
     * level is at most this).
     */
    public record Attr(int dataBsize, SyncMode syncMode, String name, int level) {
        public Attr {
            if (dataBsize < 2048 || Integer.bitCount(dataBsize) != 1) {
                throw new IllegalArgumentException("data_bsize " + dataBsize + ": a power of two of at least 2 KiB");
            }
            Objects.requireNonNull(syncMode, "sync_mode");
            if (level < 0 || level > 5) {
                throw new IllegalArgumentException("level " + level + ": 0 (no print) .. 5 (debug)");
            }
        }
    }

    static final int HEADER = 4096;
    static final int DESC = 64;

    private final FlexioProcess process;
    private final Attr attr;
    private final Consumer<String> out;
    private final AddressSpace proc;
    private final long va;
    private final DevxUmem umem;
    private final DevxObj mkey;
    private final DevxObj window;
    private final long desc;
    private final Runnable teardown;
    /** Guards the consumer side: {@link #ci}, {@link #partial}, {@link #overruns}. */
    private final ReentrantLock reader = new ReentrantLock();
    private long ci;
    private final StringBuilder partial = new StringBuilder();
    private long overruns;
    private volatile boolean stop;
    private final Thread printer;
    private boolean destroyed;
    /** What {@code dpa:msg} shows of it. */
    private final FlexioMsgLog.Journal journal;

    private FlexioMsgStream(FlexioProcess p, Attr attr, Consumer<String> out) {
        this.process = p;
        this.attr = attr;
        this.out = out;
        this.proc = p.ctx.process();
        long len = HEADER + attr.dataBsize();
        this.va = proc.mmap(len);
        DevxUmem um = null;
        DevxObj mk = null;
        DevxObj win = null;
        try {
            proc.populate(va, len, true);
            um = Mlx5dv.devxUmemReg(p.ctx, va, len, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ);
            mk = Mlx5dv.devxObjCreate(p.ctx, Prm.createUmemMkey(p.pdn(), va, len, um.umemId(), 0), 16);
            int pid = p.id();
            win = Prm.create(p.ctx, OBJ_DPA_WINDOW, c -> {
                WINDOW_PROCESS.set(c, 0, pid);
                WINDOW_PD.set(c, 0, p.pdn());
            });
            ByteBuffer d = ByteBuffer.allocate(DESC).order(ByteOrder.LITTLE_ENDIAN);
            d.putInt(Prm.objId(win)).putInt(Prm.index(mk) << 8).putLong(va).putLong(attr.dataBsize()).putInt(attr.level());
            this.desc = p.copyFromHost(d.array());
        } catch (RuntimeException e) {
            if (win != null) {
                Mlx5dv.devxObjDestroy(win);
            }
            if (mk != null) {
                Mlx5dv.devxObjDestroy(mk);
            }
            if (um != null) {
                Mlx5dv.devxUmemDereg(um);
            }
            proc.munmap(va, len);
            throw e;
        }
        this.umem = um;
        this.mkey = mk;
        this.window = win;
        this.journal = FlexioMsgLog.open(p, attr);
        this.teardown = p.own(this::release);
        this.printer = attr.syncMode() == SyncMode.SYNC
                ? Thread.ofPlatform().daemon().name("flexio-msg-" + attr.name()).start(this::printLoop) : null;
    }

    /** {@code flexio_msg_stream_create}: lines go to {@code out} (the C call's {@code FILE *}). */
    public static FlexioMsgStream create(FlexioProcess p, Attr attr, Consumer<String> out) {
        Objects.requireNonNull(out, "out");
        p.lock.lock();
        try {
            p.checkAlive();
            return new FlexioMsgStream(p, attr, out);
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_msg_stream_create of " + attr.name(), e);
        } finally {
            p.lock.unlock();
        }
    }

    /** The descriptor's DPA address: what device code passes to {@code FlexioDevMsg.msg}. */
    public long daddr() {
        return desc;
    }

    /** {@code flexio_msg_stream_get_id}: the window the stream writes through. */
    public int id() {
        return Prm.objId(window);
    }

    /** Bytes the device overwrote before the host read them. */
    public long overruns() {
        reader.lock();
        try {
            return overruns;
        } finally {
            reader.unlock();
        }
    }

    /** SYNC: polls the producer index and prints what arrived (a poll's back-off, not a synchronisation). */
    private void printLoop() {
        while (!stop) {
            if (drain() == 0) {
                LockSupport.parkNanos(200_000);
            }
        }
    }

    /** {@code flexio_msg_stream_flush}: prints every complete line received so far. */
    public void flush() {
        drain();
    }

    /** Reads [ci, pi) of the ring and prints its complete lines; returns the bytes read. */
    private int drain() {
        reader.lock();
        try {
            byte[] pib = new byte[8];
            proc.read(va, pib, 0, 8);
            long pi = ByteBuffer.wrap(pib).order(ByteOrder.LITTLE_ENDIAN).getLong();
            long size = attr.dataBsize();
            if (pi - ci > size) {
                overruns += pi - ci - size;
                FlexioMsgLog.overruns(journal, overruns);
                ci = pi - size;
                partial.setLength(0); // the line it was in is lost
            }
            int n = (int) (pi - ci);
            if (n == 0) {
                return 0;
            }
            byte[] data = new byte[n];
            long at = ci & (size - 1);
            int first = (int) Math.min(n, size - at);
            proc.read(va + HEADER + at, data, 0, first);
            if (first < n) {
                proc.read(va + HEADER, data, first, n - first);
            }
            ci = pi;
            partial.append(new String(data, StandardCharsets.US_ASCII));
            int nl;
            while ((nl = partial.indexOf("\n")) >= 0) {
                String line = partial.substring(0, nl);
                FlexioMsgLog.line(journal, line);
                out.accept(line);
                partial.delete(0, nl + 1);
            }
            return n;
        } finally {
            reader.unlock();
        }
    }

    /** Stops the printer, prints what is left, then window, mkey, umem and memory go (the process's lock held). */
    private void release() {
        stop = true;
        if (printer != null) {
            try {
                printer.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        drain();
        FlexioMsgLog.closed(journal);
        Mlx5dv.devxObjDestroy(window);
        Mlx5dv.devxObjDestroy(mkey);
        Mlx5dv.devxUmemDereg(umem);
        proc.munmap(va, HEADER + attr.dataBsize());
    }

    /** {@code flexio_msg_stream_destroy}: what was received is printed first. */
    public void destroy() {
        process.lock.lock();
        try {
            if (destroyed) {
                return;
            }
            destroyed = true;
            if (process.alive()) {
                process.disown(teardown);
                teardown.run();
                process.bufDevFree(desc);
            }
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_msg_stream_destroy of " + attr.name(), e);
        } finally {
            process.lock.unlock();
        }
    }

    @Override
    public void close() {
        destroy();
    }
}
