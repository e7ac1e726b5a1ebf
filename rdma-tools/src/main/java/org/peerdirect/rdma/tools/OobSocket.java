package org.peerdirect.rdma.tools;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;

/**
 * The TCP connection the tools across hosts exchange their addresses on (rdma-core's
 * {@code pp_client_exch_dest}/{@code pp_server_exch_dest}, perftest's {@code establish_connection}):
 * the server listens on {@code -p} (default 18515) and takes one client; the client connects to
 * {@code --client HOST}. Every wait is bounded by {@link Completions#TIMEOUT_NS} and gives up when
 * the command's thread is interrupted (Ctrl-C), so a peer that never comes is an error naming what
 * did not happen, not a hang. Unlike the C tools, the client retries a refused connection until the
 * deadline: the other side may still be starting (a guest booting, a server thread not listening yet).
 *
 * <p>Each message goes out in one {@code write}: the C tools read a message with one
 * {@code read(fd, msg, sizeof msg)} and fail on a short read.
 */
final class OobSocket implements AutoCloseable {

    /** The C tools' default out-of-band port. */
    static final int DEFAULT_PORT = 18515;
    private static final int SLICE_MS = 200;

    private final Socket s;
    private final InputStream in;
    private final OutputStream out;
    private final String tool;

    private OobSocket(Socket s, String tool) throws IOException {
        this.s = s;
        this.tool = tool;
        s.setTcpNoDelay(true);
        s.setSoTimeout(SLICE_MS);
        this.in = s.getInputStream();
        this.out = s.getOutputStream();
    }

    /** The client's side: connected to {@code host:port}, retrying a refused connection until the deadline. */
    static OobSocket connect(String tool, String host, int port) {
        long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
        IOException last = null;
        while (System.nanoTime() - deadline < 0) {
            Completions.checkInterrupted(tool);
            Socket s = new Socket();
            try {
                s.connect(new InetSocketAddress(host, port), 5_000);
                return new OobSocket(s, tool);
            } catch (ConnectException | SocketTimeoutException e) {
                last = e;
                closeQuietly(s);
                sleepSlice(tool);
            } catch (IOException e) {
                closeQuietly(s);
                throw new IllegalStateException(tool + ": couldn't connect to " + host + ":" + port + ": " + e.getMessage(), e);
            }
        }
        throw new IllegalStateException(tool + ": couldn't connect to " + host + ":" + port + " within 60 s (is the server running there with -p "
                + port + "?): " + (last == null ? "" : last.getMessage()));
    }

    /** The server's side: listens on {@code port} (all addresses, as the C tools) and takes the first client within the deadline. */
    static OobSocket accept(String tool, int port) {
        try (ServerSocket ss = new ServerSocket()) {
            ss.setReuseAddress(true);
            ss.bind(new InetSocketAddress(port), 1);
            ss.setSoTimeout(SLICE_MS);
            long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
            while (true) {
                Completions.checkInterrupted(tool);
                try {
                    return new OobSocket(ss.accept(), tool);
                } catch (SocketTimeoutException slice) {
                    if (System.nanoTime() - deadline > 0) {
                        throw new IllegalStateException(tool + ": no client connected to port " + port + " within 60 s");
                    }
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException(tool + ": couldn't listen on port " + port + ": " + e.getMessage(), e);
        }
    }

    /** Sends {@code msg} in one write. */
    void write(byte[] msg, String what) {
        try {
            out.write(msg);
            out.flush();
        } catch (IOException e) {
            throw new IllegalStateException(tool + ": couldn't send " + what + ": " + e.getMessage(), e);
        }
    }

    /** Exactly {@code n} bytes of {@code what}; an error naming it when the peer closes or the deadline passes. */
    byte[] read(int n, String what) {
        byte[] b = new byte[n];
        long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
        int got = 0;
        while (got < n) {
            Completions.checkInterrupted(tool);
            try {
                int k = in.read(b, got, n - got);
                if (k < 0) {
                    throw new EOFException();
                }
                got += k;
            } catch (SocketTimeoutException slice) {
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException(tool + ": " + what + " did not arrive within 60 s (" + got + " of " + n + " bytes)");
                }
            } catch (IOException e) {
                throw new IllegalStateException(tool + ": couldn't read " + what + " (" + got + " of " + n + " bytes, the peer "
                        + (e instanceof EOFException ? "closed the connection" : e.getMessage()) + ")", e);
            }
        }
        return b;
    }

    /** The peer's address, as the tools print it. */
    String peer() {
        return String.valueOf(s.getRemoteSocketAddress());
    }

    @Override
    public void close() {
        closeQuietly(s);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // nothing left to do with it
        }
    }

    private static void sleepSlice(String tool) {
        try {
            Thread.sleep(SLICE_MS); // a retry pace, not synchronisation: the server is another program
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(tool + ": interrupted while connecting");
        }
    }
}
