package org.peerdirect.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.rdma.RcConnect;

/**
 * The bytes, pinned: a plain Java socket plays the C program (ibv_rc_pingpong's client,
 * ib_write_bw's client) against {@code rdma:pingpong --server} and {@code rdma:write_bw --server},
 * writing and reading every message as the C source does (formats, sizes, NULs, byte order),
 * with its own QP on mlx4_1 doing the data part. Nothing of the tools' exchange code is used
 * here: a change of one byte there fails these tests.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class OobWireFormatTest {

    @TempDir
    Path tmp;
    TwoHosts hosts;
    RawEnd me;

    @BeforeEach
    void up() {
        hosts = new TwoHosts(tmp);
        AddressSpace proc = hosts.machine.process("c-tool");
        me = new RawEnd(proc, hosts.machine.device(1).open(proc));
    }

    @AfterEach
    void down() {
        me.close();
        hosts.close();
    }

    /** The C program's verbs side: one RC QP and 64 KiB registered, in its own process. */
    static final class RawEnd {
        final AddressSpace proc;
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;
        final IbvWc[] wc = {new IbvWc()};

        RawEnd(AddressSpace proc, IbvContext ctx) {
            this.proc = proc;
            this.ctx = ctx;
            pd = ctx.allocPd();
            cq = ctx.createCq(64, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = IbvQpType.RC;
            a.maxSendWr = 16;
            a.maxRecvWr = 16;
            qp = pd.createQp(a);
            buf = proc.mmap(1 << 16);
            proc.populate(buf, 1 << 16, true);
            mr = pd.regMr(buf, 1 << 16, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ);
        }

        IbvWc await() {
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (cq.poll(1, wc) == 0) {
                assertTrue(System.nanoTime() < deadline, "no completion within 30 s");
                Thread.onSpinWait();
            }
            assertEquals(IbvWcStatus.SUCCESS, wc[0].status, "completion status");
            return wc[0];
        }

        void close() {
            mr.dereg();
            qp.destroy();
            cq.destroy();
            pd.dealloc();
            ctx.close();
            proc.munmap(buf, 1 << 16);
        }
    }

    /** The tool's server on its own thread; its output, or its failure's text, lands in {@code out[0]}. */
    private static Thread server(String[] out, TwoHosts.Command tool) {
        return Thread.ofPlatform().start(() -> {
            try {
                out[0] = tool.run();
            } catch (Throwable t) {
                out[0] = "failed: " + t;
            }
        });
    }

    /** connect(2) until the tool's server listens (it starts on another thread). */
    private static Socket connect(int port) throws Exception {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (true) {
            try {
                Socket s = new Socket();
                s.connect(new InetSocketAddress("127.0.0.1", port), 5_000);
                s.setSoTimeout(30_000);
                return s;
            } catch (ConnectException refused) {
                assertTrue(System.nanoTime() < deadline, "the tool's server did not listen within 30 s");
                Thread.sleep(100); // retry pace while the server thread starts
            }
        }
    }

    private static byte[] nul(String s, int size) {
        byte[] b = s.getBytes(StandardCharsets.US_ASCII);
        assertEquals(size - 1, b.length, "'" + s + "' is " + (size - 1) + " characters before its NUL");
        return Arrays.copyOf(b, size);
    }

    private static String text(byte[] b) {
        return new String(b, StandardCharsets.US_ASCII);
    }

    @Test
    void rcPingpongServerSpeaksIbvRcPingpongsBytes() throws Exception {
        int port = RxeGuest.freePort(false);
        int size = 8192;
        int myPsn = 0x00beef;
        String[] serverOut = new String[1];
        Thread srv = server(serverOut, () -> hosts.tools.pingpong("--server", "-p", String.valueOf(port), "-d", "mlx4_0", "-s", String.valueOf(size),
                "-n", "3", "-c"));
        int lid = me.ctx.queryPort(1).lid();
        byte[] theirs;
        try (Socket s = connect(port)) {
            InputStream in = s.getInputStream();
            OutputStream out = s.getOutputStream();
            // pp_client_exch_dest: "%04x:%06x:%06x:%s" with a zero GID (no -g), 52 bytes with the NUL
            out.write(nul(String.format("%04x:%06x:%06x:%032x", lid, me.qp.qpNum(), myPsn, 0), 52));
            theirs = in.readNBytes(52);
            Matcher m = Pattern.compile("([0-9a-f]{4}):([0-9a-f]{6}):([0-9a-f]{6}):(0{32})\0").matcher(text(theirs));
            assertTrue(m.matches(), "the server's 52 bytes: '" + text(theirs) + "'");
            assertEquals(hosts.machine.device(0).open(hosts.machine.process("lid")).queryPort(1).lid(), Integer.parseInt(m.group(1), 16));
            new RcConnect().access(IbAccess.LOCAL_WRITE).minRnrTimer(12).timeout(14, 7).pathMtu(3)
                    .psn(myPsn, Integer.parseInt(m.group(3), 16)).connect(me.qp, Integer.parseInt(m.group(1), 16), Integer.parseInt(m.group(2), 16));
            IbvRecvWr r = new IbvRecvWr().sge(me.buf, size, me.mr.lkey());
            for (int i = 0; i < 3; i++) {
                me.qp.postRecv(r);
            }
            out.write(nul("done", 5));
            // rc_pingpong -c: memset 0x7b, the first byte of each page 0; three round trips
            byte[] data = new byte[size];
            Arrays.fill(data, (byte) 0x7b);
            data[0] = 0;
            data[4096] = 0;
            me.proc.write(me.buf, data, 0, size);
            IbvSendWr w = new IbvSendWr().sge(me.buf, size, me.mr.lkey());
            w.opcode = IbvWrOpcode.SEND;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            for (int i = 0; i < 3; i++) {
                me.qp.postSend(w);
                me.await();
                me.await(); // the send's and the echo's, in either order
            }
            byte[] back = new byte[size];
            me.proc.read(me.buf, back, 0, size);
            assertArrayEquals(data, back, "the server sends back what it received");
        }
        srv.join(30_000);
        assertTrue(serverOut[0] != null && serverOut[0].contains(String.format("QPN 0x%06x, PSN 0x%06x, GID ::", me.qp.qpNum(), myPsn))
                && serverOut[0].contains("validated 3 received buffers of 8192 bytes"), String.valueOf(serverOut[0]));
    }

    @Test
    void writeBwServerSpeaksPerftestsBytes() throws Exception {
        int port = RxeGuest.freePort(false);
        String[] serverOut = new String[1];
        Thread srv = server(serverOut, () -> hosts.tools.write_bw("--server", "-p", String.valueOf(port), "-d", "mlx4_0", "-s", "65536", "-n", "7"));
        int lid = me.ctx.queryPort(1).lid();
        int myPsn = 0x123456;
        try (Socket s = connect(port)) {
            InputStream in = s.getInputStream();
            OutputStream out = s.getOutputStream();
            // exchange_versions: char[16], the client first
            out.write(Arrays.copyOf("6.06".getBytes(StandardCharsets.US_ASCII), 16));
            byte[] version = in.readNBytes(16);
            assertTrue(text(version).startsWith("6.06\0"), text(version));
            // check_sys_data: cycle buffer, cache line size; 4 bytes each, network order
            out.write(ByteBuffer.allocate(4).putInt(4096).array());
            assertEquals(4096, ByteBuffer.wrap(in.readNBytes(4)).getInt());
            out.write(ByteBuffer.allocate(4).putInt(64).array());
            assertEquals(64, ByteBuffer.wrap(in.readNBytes(4)).getInt());
            // check_mtu: "%d" of enum ibv_mtu in 2 bytes
            out.write(nul("3", 2));
            byte[] mtu = in.readNBytes(2);
            assertTrue(mtu[0] >= '1' && mtu[0] <= '5' && mtu[1] == 0, Arrays.toString(mtu));
            // KEY_PRINT_FMT (no GID): LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN, 59 bytes with the NUL
            byte[] key = nul(String.format("%04x:%04x:%06x:%06x:%08x:%016x:%08x", lid, 16, me.qp.qpNum(), myPsn, me.mr.rkey(), me.buf, 0), 59);
            out.write(key);
            byte[] rem = in.readNBytes(59);
            Matcher m = Pattern.compile("([0-9a-f]{4}):([0-9a-f]{4}):([0-9a-f]{6}):([0-9a-f]{6}):([0-9a-f]{8}):([0-9a-f]{16}):([0-9a-f]{8})\0")
                    .matcher(text(rem));
            assertTrue(m.matches(), "the server's 59 bytes: '" + text(rem) + "'");
            new RcConnect().access(IbAccess.LOCAL_WRITE).minRnrTimer(12).timeout(14, 7).pathMtu(3).rdAtomic(Integer.parseInt(m.group(2), 16))
                    .psn(myPsn, Integer.parseInt(m.group(4), 16)).connect(me.qp, Integer.parseInt(m.group(1), 16), Integer.parseInt(m.group(3), 16));
            for (int i = 0; i < 2; i++) { // the second hand shake (printed), the one after RTR
                out.write(key);
                assertArrayEquals(rem, in.readNBytes(59));
            }
            // the test: one RDMA WRITE into the server's buffer at the address and R_Key it sent
            IbvSendWr w = new IbvSendWr().sge(me.buf, 4096, me.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = Long.parseUnsignedLong(m.group(6), 16);
            w.rkey = (int) Long.parseLong(m.group(5), 16);
            me.qp.postSend(w);
            me.await();
            out.write(key); // the client's end
            assertArrayEquals(rem, in.readNBytes(59));
            // xchg_bw_reports: size and iterations (8 bytes), BW peak, BW average, message rate (doubles), network order
            ByteBuffer rep = ByteBuffer.allocate(40).putLong(65536).putLong(7).putDouble(123.25).putDouble(100.5).putDouble(0.001536);
            for (int i = 0; i < 5; i++) {
                out.write(rep.array(), i * 8, 8);
                byte[] got = in.readNBytes(8);
                assertEquals(8, got.length, "the server's report field " + i);
            }
            out.write(key); // ctx_close_connection: a hand shake, then "done"
            assertArrayEquals(rem, in.readNBytes(59));
            out.write(nul("done", 5));
            assertEquals("done\0", text(in.readNBytes(5)));
        }
        srv.join(30_000);
        assertTrue(serverOut[0] != null && serverOut[0].contains(" 65536      7              123.25             100.50               0.001536"),
                "the server prints the client's report as perftest's server does:\n" + serverOut[0]);
    }

    @Test
    void aPeerThatIsNotThePingpongIsRefusedQuotingWhatItSent() throws Exception {
        int port = RxeGuest.freePort(false);
        Throwable[] failure = new Throwable[1];
        Thread srv = Thread.ofPlatform().start(() -> {
            try {
                hosts.tools.pingpong("--server", "-p", String.valueOf(port), "-d", "mlx4_0");
            } catch (Throwable t) {
                failure[0] = t;
            }
        });
        try (Socket s = connect(port)) {
            s.getOutputStream().write(nul("GET / HTTP/1.0 and a lot more of nothing useful....", 52));
            assertEquals(-1, s.getInputStream().read(), "the server closes without answering");
        } catch (IOException reset) {
            // a reset is a close too
        }
        srv.join(30_000);
        assertTrue(failure[0] != null && failure[0].getMessage().contains("Couldn't parse line <GET / HTTP/1.0"), String.valueOf(failure[0]));
    }
}
