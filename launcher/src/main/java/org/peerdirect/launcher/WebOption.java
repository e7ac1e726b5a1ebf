package org.peerdirect.launcher;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code --web [[HOST:]PORT]}: the Felix Web Console with peerdirect's pages and {@code /metrics},
 * served by Felix HTTP (Jetty) from the bundles of the distribution's {@code web/} folder, which
 * are installed only then. The default is {@value #DEFAULT_HOST}:{@value #DEFAULT_PORT}.
 *
 * <p>On a loopback address the console opens without a password (the webconsole bundle's
 * {@code LoopbackAccess}, told the address by {@value #LOOPBACK_PROPERTY}). Any other address
 * reaches other machines: it is refused unless the Web Console's credentials are set
 * ({@value #USER} and {@value #PASSWORD}, as system properties), and then the Web Console asks
 * for them.
 */
record WebOption(String host, int port) {

    static final String DEFAULT_HOST = "127.0.0.1";
    static final int DEFAULT_PORT = 8765;
    /** The Web Console's own framework properties for its user and password (default admin/admin). */
    static final String USER = "felix.webconsole.username";
    static final String PASSWORD = "felix.webconsole.password";
    /** Read by the webconsole bundle: the server listens on this loopback address, no password. */
    static final String LOOPBACK_PROPERTY = "peerdirect.web.loopback";
    /** SPI Fly logs each provider it wires at INFO through JUL; held so the level sticks (JUL keeps weak references). */
    private static final java.util.logging.Logger SPIFLY_LOG = java.util.logging.Logger.getLogger("org.apache.aries.spifly");

    /** True when {@code arg} is the optional value of {@code --web} ("8080", "0.0.0.0:8080"), not the next option. */
    static boolean isValue(String arg) {
        return arg.matches("([^\\s:/]+:)?\\d+") && !arg.startsWith("-");
    }

    static WebOption parse(String value) {
        if (value == null) {
            return new WebOption(DEFAULT_HOST, DEFAULT_PORT);
        }
        int colon = value.lastIndexOf(':');
        String host = colon < 0 ? DEFAULT_HOST : value.substring(0, colon);
        int port;
        try {
            port = Integer.parseInt(value.substring(colon + 1));
        } catch (NumberFormatException e) {
            port = -1;
        }
        if (port < 1 || port > 65535) {
            throw new CommandLine.UsageException("--web takes a port from 1 to 65535, optionally after an address (--web 8765, --web 127.0.0.1:8765), got '" + value + "'");
        }
        return new WebOption(host, port);
    }

    boolean loopback() {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            throw new CommandLine.UsageException("--web: unknown address '" + host + "'");
        }
    }

    /**
     * Refuses an address other machines reach while the Web Console's credentials are unset (its
     * built-in admin/admin would guard it); the message says how to set them.
     */
    void checkCredentials() {
        if (loopback()) {
            return;
        }
        String user = System.getProperty(USER, "");
        String password = System.getProperty(PASSWORD, "");
        if (user.isBlank() || password.isBlank()) {
            throw new CommandLine.UsageException("--web " + host + ":" + port + " would serve the console beyond this machine without a password. "
                    + "Set the Web Console's credentials first, for example: PEERDIRECT_JAVA_OPTS='-D" + USER + "=me -D" + PASSWORD
                    + "=a-secret' ./peerdirect --web " + host + ":" + port + " (or serve on 127.0.0.1, the default, without them)");
        }
    }

    /**
     * Fails when the port cannot be had (another server on it, a port below 1024 without the
     * right): Jetty would only log that, and the console would silently not be there. Checked
     * once at start, so a server that takes the port in the next instant still wins.
     */
    void checkPortFree() {
        try (java.net.ServerSocket s = new java.net.ServerSocket()) {
            s.setReuseAddress(true);
            s.bind(new java.net.InetSocketAddress(InetAddress.getByName(host), port));
        } catch (java.io.IOException e) {
            throw new IllegalStateException("--web cannot listen on " + host + ":" + port + " (" + e.getMessage()
                    + "): another server has it? Give another port: --web " + (port == 65535 ? 8765 : port + 1));
        }
    }

    /** The framework properties Felix HTTP and the Web Console read. */
    Map<String, Object> frameworkConfig() {
        SPIFLY_LOG.setLevel(java.util.logging.Level.WARNING);
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("org.osgi.service.http.port", Integer.toString(port));
        c.put("org.apache.felix.http.host", host);
        c.put("org.apache.felix.http.jetty.sendServerHeader", "false");
        if (loopback()) {
            c.put(LOOPBACK_PROPERTY, host);
        } else {
            c.put(USER, System.getProperty(USER));
            c.put(PASSWORD, System.getProperty(PASSWORD));
        }
        return c;
    }

    /** The web bundles beside the project's. */
    static Path bundles(Path dist) {
        return dist.resolve("web");
    }

    String address() {
        return "http://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }
}
