package org.peerdirect.webconsole;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Hashtable;

import org.apache.felix.webconsole.spi.SecurityProvider;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

/**
 * Opens the Web Console without a password when, and only when, the HTTP server listens on the
 * loopback address: the launcher sets {@value #PROPERTY} to that address ({@code ./peerdirect
 * --web}), and refuses to start on any other address unless the Web Console's own credentials
 * ({@code felix.webconsole.username}, {@code felix.webconsole.password}) are set, in which case
 * this provider is not registered and the Web Console asks for them.
 *
 * <p>Even then a request must come from a loopback address itself; anything else is refused.
 */
@Component
public final class LoopbackAccess implements SecurityProvider {

    /** Framework property: the address the HTTP server listens on when it is a loopback one. */
    static final String PROPERTY = "peerdirect.web.loopback";

    private ServiceRegistration<SecurityProvider> registration;

    @Activate
    void activate(BundleContext ctx) {
        String host = ctx.getProperty(PROPERTY);
        if (host != null && isLoopback(host)) {
            Hashtable<String, Object> props = new Hashtable<>();
            props.put(SecurityProvider.PROPERTY_ID, "peerdirect-loopback");
            registration = ctx.registerService(SecurityProvider.class, this, props);
        }
    }

    @Deactivate
    void deactivate() {
        if (registration != null) {
            registration.unregister();
        }
    }

    static boolean isLoopback(String host) {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }

    @Override
    public Object authenticate(HttpServletRequest request, HttpServletResponse response) {
        if (isLoopback(request.getRemoteAddr())) {
            return "local user";
        }
        response.setStatus(HttpServletResponse.SC_FORBIDDEN);
        return null;
    }

    @Override
    public boolean authorize(Object user, String role) {
        return user != null;
    }

    @Override
    public void logout(HttpServletRequest request, HttpServletResponse response) {
        // nothing is kept per user
    }
}
