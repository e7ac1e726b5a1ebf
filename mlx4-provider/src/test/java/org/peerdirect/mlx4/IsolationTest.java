package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.function.Consumer;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.rdma.RcConnect;

/**
 * Isolation, one test per attack class (issue 10): an attacker process with its own context on the
 * other HCA tries RDMA WRITEs and READs into a victim's memory through an MR it should no longer
 * (or never) reach. Every attempt must complete in error and leave the victim's bytes as they
 * were: the count of successes is 0 in each class.
 */
class IsolationTest {

    static final byte VICTIM = 0x5a;

    @TempDir
    Path tmp;
    Lab lab;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
    }

    @AfterEach
    void down() {
        lab.close();
    }

    /**
     * The victim: its own process, context, PD, CQ and a 64 KiB buffer filled with {@link #VICTIM};
     * each attack connects a fresh QP of {@link #qpPd} (a QP that saw a remote access error is in ERR).
     */
    final class Victim {
        final AddressSpace proc = lab.mm.createProcess("victim");
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvPd qpPd;
        final long buf;

        Victim(boolean qpInAnotherPd) {
            proc.setMemlockLimit(1L << 30);
            ctx = lab.ib.get(1).open(proc);
            pd = ctx.allocPd();
            cq = ctx.createCq(16, null);
            buf = proc.mmap(1 << 16);
            proc.populate(buf, 1 << 16, true);
            byte[] fill = new byte[1 << 16];
            java.util.Arrays.fill(fill, VICTIM);
            proc.write(buf, fill, 0, fill.length);
            qpPd = qpInAnotherPd ? ctx.allocPd() : pd;
        }

        IbvQp newQp() {
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = IbvQpType.RC;
            return qpPd.createQp(a);
        }

        Victim() {
            this(false);
        }

        boolean intact() {
            byte[] now = new byte[1 << 16];
            proc.read(buf, now, 0, now.length);
            for (byte b : now) {
                if (b != VICTIM) {
                    return false;
                }
            }
            return true;
        }
    }

    /**
     * One attack: a fresh attacker QP connected to a fresh victim QP writes 64 bytes at
     * {@code addr} with {@code rkey} (and, on odd attempts, reads them). Returns the completion's status.
     */
    IbvWcStatus attack(Victim v, long addr, int rkey, boolean read, Consumer<Victim> beforePost) {
        Lab.End attacker = lab.new End(0, 1 << 12, IbvQpType.RC, Lab.RW);
        IbvQp target = v.newQp();
        new RcConnect().access(Lab.RW).minRnrTimer(1).timeout(1, 1).connect(attacker.qp, v.ctx.queryPort(1).lid(), target.qpNum());
        new RcConnect().access(Lab.RW).minRnrTimer(1).timeout(1, 1).connect(target, attacker.lid, attacker.qp.qpNum());
        if (beforePost != null) { // the victim dies or closes its context only now, with its QP connected
            beforePost.accept(v);
        }
        IbvSendWr w = new IbvSendWr().sge(attacker.buf, 64, attacker.mr.lkey());
        w.opcode = read ? IbvWrOpcode.RDMA_READ : IbvWrOpcode.RDMA_WRITE;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteAddr = addr;
        w.rkey = rkey;
        attacker.qp.postSend(w);
        IbvWc c = Lab.await(attacker.cq, 1).get(0);
        attacker.ctx.close();
        return c.status;
    }

    /** An attack on a victim whose QP is alive: refused by the victim's HCA as a remote access error. Counts a success as 1. */
    int refused(Victim v, long addr, int rkey, boolean read) {
        IbvWcStatus s = attack(v, addr, rkey, read, null);
        assertTrue(s == IbvWcStatus.SUCCESS || s == IbvWcStatus.REM_ACCESS_ERR, "refused by the rkey check, not by something else: " + s);
        return s == IbvWcStatus.SUCCESS ? 1 : 0;
    }

    /** MPT entries alive on the victim's HCA (device 1). */
    int victimKeys() {
        return lab.machine.engine(1).mptCount();
    }

    @Test
    void aDeadProcessesMrIsUnreachable() {
        int successes = 0;
        for (int i = 0; i < 8; i++) {
            Victim v = new Victim();
            int keys = victimKeys();
            IbvMr mr = v.pd.regMr(v.buf, 1 << 16, Lab.RW);
            assertEquals(keys + 1, victimKeys());
            successes += attack(v, v.buf, mr.rkey(), i % 2 == 1, victim -> victim.proc.exit()) == IbvWcStatus.SUCCESS ? 1 : 0;
            // the QP that could use the key died with the process too, so the key itself is checked in the HCA
            assertEquals(keys, victimKeys(), "the dead process's key was revoked in the HCA, not only its QP destroyed");
        }
        assertEquals(0, successes, "writes or reads into a dead process's memory");
    }

    @Test
    void aGuessedRkeyOfAnotherPdIsRefused() {
        Victim w = new Victim(true); // its QP is in another PD than its MR
        IbvMr mr = w.pd.regMr(w.buf, 1 << 16, Lab.RW);
        int successes = 0;
        // the true rkey through a QP of another PD, then guesses around it: other indices, other key bytes
        successes += refused(w, w.buf, mr.rkey(), false);
        for (int guess = 1; guess <= 24; guess++) {
            int key = guess % 2 == 0 ? mr.rkey() + (guess << 8) : (mr.rkey() & ~0xff) | ((mr.rkey() + guess) & 0xff);
            assertNotEquals(mr.rkey(), key);
            successes += refused(w, w.buf, key, guess % 3 == 0);
        }
        assertEquals(0, successes, "accesses through another PD's or a guessed rkey");
        assertTrue(w.intact(), "the victim's bytes are untouched");
        w.proc.exit();
    }

    @Test
    void aDeregisteredMrIsUnreachableEvenWhenItsIndexIsReused() {
        Victim v = new Victim();
        int successes = 0;
        IbvMr live = v.pd.regMr(v.buf, 1 << 16, Lab.RW);
        assertEquals(IbvWcStatus.SUCCESS, attack(v, v.buf, live.rkey(), true, null), "control: the harness sees a legitimate READ succeed");
        live.dereg();
        for (int i = 0; i < 8; i++) {
            IbvMr mr = v.pd.regMr(v.buf, 1 << 16, Lab.RW);
            int stale = mr.rkey();
            mr.dereg();
            IbvMr fresh = v.pd.regMr(v.buf, 4096, org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE); // may take the same MPT index
            assertNotEquals(stale, fresh.rkey(), "the key byte rotated");
            successes += refused(v, v.buf, stale, i % 2 == 1);
            fresh.dereg();
        }
        assertEquals(0, successes, "accesses through a deregistered MR's rkey");
        assertTrue(v.intact());
        v.proc.exit();
    }

    @Test
    void aClosedContextsMrIsUnreachable() {
        int successes = 0;
        for (int i = 0; i < 8; i++) {
            Victim v = new Victim();
            int keys = victimKeys();
            IbvMr mr = v.pd.regMr(v.buf, 1 << 16, Lab.RW);
            successes += attack(v, v.buf, mr.rkey(), i % 2 == 1, victim -> victim.ctx.close()) == IbvWcStatus.SUCCESS ? 1 : 0;
            assertEquals(keys, victimKeys(), "the closed context's key was revoked in the HCA");
            assertTrue(v.intact());
            v.proc.exit();
        }
        assertEquals(0, successes, "accesses through a closed context's MR");
    }
}
