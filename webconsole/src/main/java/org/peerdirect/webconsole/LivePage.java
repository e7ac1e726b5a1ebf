package org.peerdirect.webconsole;

import java.io.IOException;
import java.io.PrintWriter;
import java.net.URL;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

import jakarta.servlet.Servlet;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

/**
 * Live plots: faults served, invalidations and bytes moved per device, per second, drawn by
 * uPlot (from its WebJar, served under {@code res/uplot/}) and fed by server-sent events from
 * {@code /pdlive/events} without a reload.
 *
 * <p>The event stream runs on the HTTP server's request thread of that browser and waits only on
 * that browser's own bounded queue ({@link Sampler}); a write that fails (the browser went) ends
 * the stream and the subscription.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + LivePage.LABEL,
        ServletConstants.PLUGIN_TITLE + "=Live plots", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY,
        ServletConstants.PLUGIN_CSS_REFERENCES + "=" + LivePage.LABEL + "/res/uplot/uPlot.min.css"})
public final class LivePage extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pdlive";
    /** A comment line this often keeps proxies from closing an idle stream and finds a vanished browser. */
    private static final long KEEPALIVE_SECONDS = 10;

    private final transient Sampler sampler;

    @Activate
    public LivePage(@Reference Sampler sampler) {
        this.sampler = sampler;
    }

    @Override
    protected URL getResource(String path) {
        int i = path.indexOf("/res/");
        return i < 0 ? null : LivePage.class.getResource(path.substring(i));
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException, ServletException {
        if (sub(req).equals("events")) {
            stream(resp);
        } else {
            super.doGet(req, resp);
        }
    }

    @Override
    Object load(String sub) {
        if (!sub.isEmpty()) {
            throw new ConsoleData.Gone("no page " + sub + " below " + LABEL);
        }
        return "";
    }

    private void stream(HttpServletResponse resp) throws IOException {
        resp.setContentType("text/event-stream");
        resp.setCharacterEncoding("UTF-8");
        resp.setHeader("Cache-Control", "no-cache");
        BlockingQueue<String> q = sampler.subscribe();
        try {
            PrintWriter out = resp.getWriter();
            out.print("retry: 2000\n\n");
            out.flush();
            while (!out.checkError()) {
                String point = q.poll(KEEPALIVE_SECONDS, TimeUnit.SECONDS);
                if (Sampler.END.equals(point)) {
                    break; // the console is going away
                }
                out.print(point == null ? ": keepalive\n\n" : "data: " + point + "\n\n");
                out.flush();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            sampler.unsubscribe(q);
        }
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        heading(out, "faults served, invalidations and bytes moved per device, per second (one point a second; "
                + "points dropped for slow browsers: see dropped)");
        out.println("<p>points: <span id='points'>0</span>, dropped: <span id='dropped'>0</span></p>");
        out.println("<h3>ODP faults served / s</h3><div id='plot-faults' class='plot'></div>");
        out.println("<h3>invalidations / s</h3><div id='plot-invalidations' class='plot'></div>");
        out.println("<h3>bytes moved (DMA) / s</h3><div id='plot-bytes' class='plot'></div>");
        out.println("<script src='" + LABEL + "/res/uplot/uPlot.iife.min.js'></script>");
        out.println("<script src='" + LABEL + "/res/live.js'></script>");
    }
}
