package org.peerdirect.interop;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.rdma.RcConnect;

/**
 * peerdirect's half of the RNR / timeout / retry cases: the steps of the guest's
 * {@code interop/guest/pd_rc.c} with peerdirect's verbs on a {@link Cx6Host}, the same options, the
 * same out-of-band exchange (rc_pingpong's 52-byte messages, then {@code done}, then each side's
 * {@code fin}) and the same result line, so a case runs unchanged whichever peer plays which side:
 * {@code -r send} posts one signaled SEND and waits for its completion; {@code -r recv} posts one
 * receive after {@code postMs} (negative: never) and waits for the message or the requester's end,
 * then keeps its QP until the requester's {@code fin} (its retransmissions meet a QP).
 */
final class RcProbe {

    /** pd_rc's options: role, size, {@code -R} rnr_retry, {@code -C} retry_cnt, {@code -t} timeout, {@code -m} min_rnr_timer, {@code -w}, {@code -W}. */
    record Opts(String role, int size, int rnrRetry, int retryCnt, int timeout, int minRnr, int postMs, int waitMs) {
        /** The same options on pd_rc's command line. */
        String args() {
            return "-r " + role + " -s " + size + " -R " + rnrRetry + " -C " + retryCnt + " -t " + timeout + " -m " + minRnr + " -w " + postMs + " -W "
                    + waitMs;
        }
    }

    /** The line both programs end with: {@code PDRC <role> status=<ibv_wc_status>|none}. */
    static final Pattern RESULT = Pattern.compile("PDRC (send|recv) status=(\\d+|none)");

    /** The completion status a program printed: the enum value, or -1 for none; an AssertionError naming the output when there is no result line. */
    static int status(String output) {
        Matcher m = RESULT.matcher(output);
        if (!m.find()) {
            throw new AssertionError("no PDRC result line in:\n" + output);
        }
        return m.group(2).equals("none") ? -1 : Integer.parseInt(m.group(2));
    }

    private RcProbe() {
    }

    /**
     * One run on {@code h}: the server side when {@code listen} is given (it accepts one client),
     * else the client of 127.0.0.1:{@code port}. {@code connected} runs once this side's QP is at
     * RTS and before the exchange's {@code done} (the test's moment to change the link).
     */
    static String run(Cx6Host h, Opts o, ServerSocket listen, int port, Runnable connected) throws IOException {
        AddressSpace proc = h.machine.mm().createProcess("pd_rc-" + o.role());
        StringBuilder out = new StringBuilder();
        try (IbvContext ctx = h.dev.open(proc)) {
            Qp q = new Qp(ctx, proc, o.size());
            try (Socket s = listen != null ? listen.accept() : connect(port)) {
                s.setSoTimeout(Math.max(60_000, o.waitMs() + 30_000));
                exchange(q, o, s, listen != null, connected, out);
                q.complete(o, s, out);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        } finally {
            proc.exit(); // closes what the context still holds, as a process's exit does
        }
        return out.toString();
    }

    /**
     * rc_pingpong's exchange ({@code pp_client_exch_dest} / {@code pp_server_exch_dest}): the
     * client sends its address, the server connects and answers, the client connects and sends
     * {@code done}; the server returns once it has it (the client is at RTR).
     */
    private static void exchange(Qp q, Opts o, Socket s, boolean server, Runnable connected, StringBuilder out) throws IOException {
        InputStream in = s.getInputStream();
        OutputStream os = s.getOutputStream();
        byte[] me = Arrays.copyOf(String.format("%04x:%06x:%06x:%s", 0, q.qp.qpNum(), q.psn, HexFormat.of().formatHex(q.gid))
                .getBytes(StandardCharsets.US_ASCII), 52);
        out.append(String.format("PDRC local qpn=%06x psn=%06x%n", q.qp.qpNum(), q.psn));
        if (!server) {
            os.write(me);
        }
        byte[] rem = new byte[52];
        new DataInputStream(in).readFully(rem);
        String[] f = new String(rem, 0, 51, StandardCharsets.US_ASCII).split(":");
        int remQpn = Integer.parseInt(f[1], 16);
        int remPsn = Integer.parseInt(f[2], 16);
        new RcConnect().access(0).minRnrTimer(o.minRnr()).timeout(o.timeout(), o.retryCnt()).rnrRetry(o.rnrRetry()).rdAtomic(1).pathMtu(3)
                .psn(q.psn, remPsn).gid(HexFormat.of().parseHex(f[3]), q.gidx).connect(q.qp, 0, remQpn);
        connected.run();
        if (!o.role().equals("send") && o.postMs() == 0) {
            q.postRecv(out, 0); // before the "done" that lets the requester send: "at once" must not race its SEND
        }
        if (!server) {
            os.write(new byte[] {'d', 'o', 'n', 'e', 0});
        } else {
            os.write(me);
            new DataInputStream(in).readFully(new byte[5]); // "done": the client is at RTR
        }
        out.append(String.format("PDRC remote qpn=%06x psn=%06x%n", remQpn, remPsn));
    }

    /** pd_rc's resources: a CQ of 4, an RC QP of one send and one receive, a registered buffer, the port's IPv4-mapped GID. */
    private static final class Qp {
        final IbvCq cq;
        final IbvQp qp;
        final IbvMr mr;
        final long buf;
        final int gidx;
        final byte[] gid;
        final int psn = ThreadLocalRandom.current().nextInt() & 0xffffff;

        Qp(IbvContext ctx, AddressSpace proc, int size) {
            this.size = size;
            IbvPd pd = ctx.allocPd();
            cq = ctx.createCq(4, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = IbvQpType.RC;
            a.maxSendWr = 1;
            a.maxRecvWr = 1;
            a.maxSendSge = 1;
            a.maxRecvSge = 1;
            qp = pd.createQp(a);
            long len = Math.max(4096, size);
            buf = proc.mmap(len);
            proc.populate(buf, len, true);
            mr = pd.regMr(buf, len, org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE);
            gidx = mappedGidIndex(ctx);
            gid = IbvGid.parse(ctx.queryGid(1, gidx));
        }

        /**
         * The message and the end: the requester posts its SEND and waits for the completion; the
         * responder posts its receive when due and waits for the message or the requester's
         * {@code fin}; then the {@code fin}s, the responder's QP kept until the requester's.
         */
        /** The one receive, posted (by the exchange when due at once, else by {@link #complete}). */
        boolean posted;
        int size;

        void postRecv(StringBuilder out, long afterMs) {
            IbvRecvWr r = new IbvRecvWr().sge(buf, size, mr.lkey());
            r.wrId = 1;
            qp.postRecv(r);
            posted = true;
            out.append("PDRC recv posted after ").append(afterMs).append(" ms\n");
        }

        void complete(Opts o, Socket s, StringBuilder out) throws IOException, InterruptedException {
            InputStream in = s.getInputStream();
            boolean sending = o.role().equals("send");
            IbvWc[] wc = {new IbvWc()};
            long t0 = System.nanoTime();
            if (sending) {
                IbvSendWr w = new IbvSendWr().sge(buf, o.size(), mr.lkey());
                w.opcode = IbvWrOpcode.SEND;
                w.sendFlags = IbvSendWr.SEND_SIGNALED;
                w.wrId = 2;
                qp.postSend(w);
            }
            boolean peerDone = false;
            int n = 0;
            while (ms(t0) < o.waitMs()) {
                if (!sending && !posted && o.postMs() >= 0 && ms(t0) >= o.postMs()) {
                    postRecv(out, ms(t0));
                }
                n = cq.poll(1, wc);
                if (n != 0) {
                    break;
                }
                if (!sending && in.available() > 0) {
                    peerDone = true; // the requester's "fin": no message is coming, or it completed meanwhile
                    n = cq.poll(1, wc);
                    break;
                }
                Thread.sleep(1); // pd_rc's pace: a program polling its CQ beside a socket
            }
            if (n != 0) {
                out.append(String.format("PDRC %s status=%d (%s) after %d ms%n", o.role(), wc[0].status.ordinal(), wc[0].status.str(), ms(t0)));
            } else {
                out.append(String.format("PDRC %s status=none (%s) after %d ms%n", o.role(), peerDone ? "the requester ended" : "timed out", ms(t0)));
            }
            fin(sending, peerDone, o.waitMs() - ms(t0), s, out);
        }
    }

    /**
     * The requester sends {@code fin} and waits for the responder's (both sides' counters are then
     * final); the responder keeps its QP until the requester's {@code fin} (its retransmissions
     * still meet a QP: duplicates, not strays), then answers.
     */
    private static void fin(boolean sending, boolean peerDone, long leftMs, Socket s, StringBuilder out) throws IOException {
        byte[] fin = {'f', 'i', 'n', 0};
        if (sending) {
            s.getOutputStream().write(fin);
            s.getInputStream().read(new byte[4]);
            return;
        }
        if (!peerDone) {
            s.setSoTimeout((int) Math.max(1, leftMs));
            try {
                s.getInputStream().read(new byte[4]);
            } catch (java.net.SocketTimeoutException late) {
                out.append("PDRC no fin from the requester\n");
            }
        }
        s.getOutputStream().write(fin);
    }

    private static long ms(long t0) {
        return (System.nanoTime() - t0) / 1_000_000;
    }

    private static Socket connect(int port) throws IOException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            Socket s = new Socket();
            try {
                s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
                return s;
            } catch (java.net.ConnectException e) {
                s.close();
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                try {
                    Thread.sleep(50); // the server is another program: poll pace
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new IOException(ie);
                }
            }
        }
    }

    /** The GID index of the port's IPv4-mapped (RoCE v2) GID, as pd_rc's {@code -g} names the guest's. */
    static int mappedGidIndex(IbvContext ctx) {
        int len = ctx.queryPort(1).gidTblLen();
        for (int i = 0; i < len; i++) {
            try {
                if (ctx.queryGid(1, i).startsWith("0000:0000:0000:0000:0000:ffff:")) {
                    return i;
                }
            } catch (org.peerdirect.kernel.mm.KernelException empty) {
                // an unused entry
            }
        }
        throw new AssertionError("the port has no IPv4-mapped GID: is it on a wire?");
    }
}
