package org.peerdirect.webconsole;

import java.io.IOException;
import java.io.PrintWriter;
import java.util.List;

import org.apache.felix.webconsole.servlet.AbstractServlet;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

/**
 * A peerdirect page in the Felix Web Console (a plugin: a {@code Servlet} service with
 * {@code felix.webconsole.label}). The Web Console frames a page (header, menu, footer) only when
 * the plugin's {@code doGet} leaves the response untouched; so the page's data is read in
 * {@link #doGet} first and kept as a request attribute, and a device or process that is gone by
 * then answers 404 with one line, before any of the frame is written. {@link #renderContent}
 * then only prints what was read: it cannot fail half-way through a table.
 */
abstract class Page extends AbstractServlet {

    private static final long serialVersionUID = 1L;
    private static final String MODEL = Page.class.getName() + ".model";

    /** The plugins' category in the Web Console's menu. */
    static final String CATEGORY = "peerdirect";

    /** Reads what the page shows for {@code sub} (the path below the label, "" for the page itself). */
    abstract Object load(String sub);

    /** Prints what {@link #load} read, as HTML. */
    abstract void render(Object model, String sub, PrintWriter out);

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException, ServletException {
        String sub = sub(req);
        if (sub.startsWith("res/")) {
            super.doGet(req, resp);
            return;
        }
        try {
            req.setAttribute(MODEL, load(sub));
        } catch (ConsoleData.Gone e) {
            resp.sendError(HttpServletResponse.SC_NOT_FOUND, e.getMessage());
        } catch (IllegalArgumentException e) {
            resp.sendError(HttpServletResponse.SC_BAD_REQUEST, e.getMessage());
        } catch (RuntimeException e) {
            // one line, never a trace: what went wrong reading, by whom
            resp.sendError(HttpServletResponse.SC_INTERNAL_SERVER_ERROR, e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    @Override
    public void renderContent(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        render(req.getAttribute(MODEL), sub(req), resp.getWriter());
    }

    /** "/label/a/b" -> "a/b"; "/label" -> "". */
    static String sub(HttpServletRequest req) {
        String p = req.getPathInfo() == null ? "" : req.getPathInfo();
        int i = p.indexOf('/', 1);
        return i < 0 ? "" : p.substring(i + 1);
    }

    /** A table with a header row; cells are escaped unless they start with {@code <a }. */
    static void table(PrintWriter out, String id, List<String> head, List<List<String>> rows) {
        out.println("<table id='" + id + "' class='tablesorter nicetable'><thead><tr>");
        for (String h : head) {
            out.print("<th>" + esc(h) + "</th>");
        }
        out.println("</tr></thead><tbody>");
        for (List<String> r : rows) {
            out.print("<tr>");
            for (String c : r) {
                out.print("<td>" + (c.startsWith("<a ") ? c : esc(c)) + "</td>");
            }
            out.println("</tr>");
        }
        out.println("</tbody></table>");
    }

    static void heading(PrintWriter out, String text) {
        out.println("<p class='statline ui-state-highlight'>" + esc(text) + "</p>");
    }

    /** A link to {@code href} (relative to the page) whose text is escaped. */
    static String link(String href, String text) {
        return "<a href='" + esc(href) + "'>" + esc(text) + "</a>";
    }

    static String esc(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (char c : s.toCharArray()) {
            switch (c) {
                case '<' -> sb.append("&lt;");
                case '>' -> sb.append("&gt;");
                case '&' -> sb.append("&amp;");
                case '"' -> sb.append("&quot;");
                case '\'' -> sb.append("&#39;");
                default -> sb.append(c);
            }
        }
        return sb.toString();
    }
}
