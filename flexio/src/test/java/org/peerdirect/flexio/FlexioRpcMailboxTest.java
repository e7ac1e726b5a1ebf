package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The host's poll of the RPC mailbox against the handler's two window writes (result, then
 * sequence), every interleaving: whatever poll first reports call {@code seq} answered reports its
 * result, never the previous call's. The writes land in the handler's order (its window fence);
 * between two host word reads any number of them may land.
 */
class FlexioRpcMailboxTest {

    static final long OLD_RESULT = 1, NEW_RESULT = 4;
    static final int OLD_SEQ = 6, SEQ = 7;

    @Test
    void everyInterleavingOfThePollWithTheHandlersWritesReadsThisCallsResult() {
        int maxReads = 8;
        int schedules = 0;
        int answered = 0;
        // a schedule: after host word read k (0-based), the writes up to w[k] have landed (non-decreasing, 0..2)
        for (List<Integer> landed : schedules(maxReads)) {
            long[] mem = new long[2]; // [0]: result word, [1]: sequence word
            mem[0] = OLD_RESULT;
            mem[1] = OLD_SEQ;
            int[] reads = {0};
            java.util.function.LongUnaryOperator word = off -> {
                int k = Math.min(reads[0]++, landed.size() - 1);
                int w = landed.get(k);
                long[] now = {w >= 1 ? NEW_RESULT : OLD_RESULT, w >= 2 ? SEQ : OLD_SEQ};
                return now[(int) (off / 8)];
            };
            long[] r = null;
            while (r == null && reads[0] < maxReads) {
                r = FlexioRpc.answer(word, SEQ);
            }
            if (r != null) {
                assertEquals(NEW_RESULT, r[0], "schedule " + landed + ": the answer of call " + SEQ + " is its own result");
                answered++;
            } else {
                assertTrue(landed.get(landed.size() - 1) < 2, "schedule " + landed + ": the sequence landed but no poll answered");
            }
            schedules++;
        }
        assertEquals(45, schedules, "every non-decreasing landing of 2 writes over 8 reads");
        assertTrue(answered >= 30, "most schedules land the sequence in time to be answered: " + answered);
    }

    /** Non-decreasing sequences of length {@code n} over {0, 1, 2}. */
    static List<List<Integer>> schedules(int n) {
        List<List<Integer>> out = new ArrayList<>();
        build(n, 0, new ArrayList<>(), out);
        return out;
    }

    private static void build(int n, int min, List<Integer> cur, List<List<Integer>> out) {
        if (cur.size() == n) {
            out.add(List.copyOf(cur));
            return;
        }
        for (int v = min; v <= 2; v++) {
            cur.add(v);
            build(n, v, cur, out);
            cur.remove(cur.size() - 1);
        }
    }
}
