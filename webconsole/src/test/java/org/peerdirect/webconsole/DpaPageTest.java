package org.peerdirect.webconsole;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpaview.DpaView;

/** The DPA page: one section per BlueField-3, 404 for a function that is not there, the CQs as dpa:threads prints them. */
class DpaPageTest {

    /** A DPA view over fixed values: one BlueField-3 with a process and a thread waiting on an armed CQ. */
    static final class OneDpa implements DpaView {
        volatile boolean plugged = true;

        @Override
        public List<String> functions() {
            return plugged ? List.of("0000:07:00.0") : List.of();
        }

        @Override
        public Map<String, Long> caps(String bdf) {
            check(bdf);
            Map<String, Long> m = new LinkedHashMap<>();
            m.put("log_max_dpa_mem", 28L);
            return m;
        }

        @Override
        public Dpa dpa(String bdf) {
            check(bdf);
            return new Dpa(bdf, true, 16, 2, 0, List.of(new Eu(2, false, 8, 900, 120)),
                    List.of(new Process(5, 3, 1, 0, 0x10000, 65536, 1, "")),
                    List.of(new Thread(6, 5, "readCqe", "WAITING", -1, 8, 0, 0, List.of(new Cq(0x41, true, true, 8, 8)))));
        }

        private void check(String bdf) {
            if (!plugged || !bdf.equals("0000:07:00.0")) {
                throw new IllegalArgumentException("no BlueField-3 at " + bdf);
            }
        }
    }

    @Test
    void eachDpaIsShownWithItsProcessesThreadsEusAndCaps() {
        DpaPage page = new DpaPage(new OneDpa());
        Object model = page.load("");
        StringWriter w = new StringWriter();
        page.render(model, "", new PrintWriter(w));
        String html = w.toString();
        assertTrue(html.contains("1 BlueField-3 DPA(s)"), html);
        assertTrue(html.contains("eus 16 (reserved 2) busy 0"), html);
        assertTrue(html.contains("<table id='dpathreads-0000-07-00-0'"), html);
        assertTrue(html.contains("<td>readCqe</td><td>WAITING</td><td>-</td><td>8</td>"), html);
        assertTrue(html.contains("<td>cq 0x41 armed pi 8 ci 8</td>"), html);
        assertTrue(html.contains("<td>log_max_dpa_mem</td><td>28</td>"), html);
        assertEquals(1, ((List<?>) page.load("0000:07:00.0")).size(), "one function by its bus address");
    }

    @Test
    void aFunctionThatIsNotThereIsGone() {
        OneDpa v = new OneDpa();
        DpaPage page = new DpaPage(v);
        assertThrows(ConsoleData.Gone.class, () -> page.load("mlx5_9"));
        v.plugged = false;
        assertThrows(ConsoleData.Gone.class, () -> page.load("0000:07:00.0"));
        assertEquals(List.of(), page.load(""), "no BlueField-3: an empty page, not an error");
    }

    @Test
    void aCqTheNicNoLongerKnowsIsAQuestionMark() {
        assertEquals("cq 0x41 not armed pi 1 ci 0, cq 0x42 ?",
                DpaPage.cqs(List.of(new DpaView.Cq(0x41, true, false, 1, 0), new DpaView.Cq(0x42, false, false, 0, 0))));
    }
}
