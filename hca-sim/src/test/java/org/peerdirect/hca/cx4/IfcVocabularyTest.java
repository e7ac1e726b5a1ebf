package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.cx4.ifc.Umr;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.hca.engine.UmrWqe;

/**
 * The ConnectX-4+ model hands the WQE bytes' opcodes and UMR bits to the shared engine unchanged,
 * so the layout package's vocabulary ({@code cx4.ifc}, what libmlx5 and {@code mlx5_ib} write)
 * and the engine's own copy ({@code hca.engine}) must agree value for value.
 */
class IfcVocabularyTest {

    @Test
    void sendOpcodesAreTheEnginesOpcodes() {
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_RDMA_WRITE_IMM, Wqe.OP_RDMA_WRITE_IMM);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_SEND, Wqe.OP_SEND);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_SEND_IMM, Wqe.OP_SEND_IMM);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_RDMA_READ, Wqe.OP_RDMA_READ);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_CS);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_ATOMIC_FA, Wqe.OP_ATOMIC_FA);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_ATOMIC_WRITE, Wqe.OP_ATOMIC_WRITE);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_FLUSH, Wqe.OP_FLUSH);
        assertEquals(org.peerdirect.hca.engine.Wqe.OP_UMR, Wqe.OP_UMR);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_TYPE_MASK, Wqe.FLUSH_TYPE_MASK);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_LEVEL_SHIFT, Wqe.FLUSH_LEVEL_SHIFT);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_LEVEL_MASK, Wqe.FLUSH_LEVEL_MASK);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_GLOBAL, Wqe.FLUSH_GLOBAL);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_PERSISTENT);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_RANGE, Wqe.FLUSH_RANGE);
        assertEquals(org.peerdirect.hca.engine.Wqe.FLUSH_MR, Wqe.FLUSH_MR);
    }

    @Test
    void opcodeClassesAgreeOnEveryByte() {
        for (int op = 0; op < 0x100; op++) {
            assertEquals(org.peerdirect.hca.engine.Wqe.valid(op), Wqe.valid(op), "valid 0x" + Integer.toHexString(op));
            assertEquals(org.peerdirect.hca.engine.Wqe.isAtomic(op), Wqe.isAtomic(op), "isAtomic 0x" + Integer.toHexString(op));
            assertEquals(org.peerdirect.hca.engine.Wqe.hasAtomicSegment(op), Wqe.hasAtomicSegment(op), "hasAtomicSegment 0x" + Integer.toHexString(op));
        }
    }

    @Test
    void umrBitsAreTheEnginesBits() {
        assertEquals(UmrWqe.FLAG_TRANSLATION_OFFSET_EN, Umr.FLAG_TRANSLATION_OFFSET_EN);
        assertEquals(UmrWqe.FLAG_CHECK_NOT_FREE, Umr.FLAG_CHECK_NOT_FREE);
        assertEquals(UmrWqe.FLAG_CHECK_FREE, Umr.FLAG_CHECK_FREE);
        assertEquals(UmrWqe.FLAG_INLINE, Umr.FLAG_INLINE);
        assertEquals(UmrWqe.MASK_LEN, Umr.MASK_LEN);
        assertEquals(UmrWqe.MASK_PAGE_SIZE, Umr.MASK_PAGE_SIZE);
        assertEquals(UmrWqe.MASK_START_ADDR, Umr.MASK_START_ADDR);
        assertEquals(UmrWqe.MASK_PD, Umr.MASK_PD);
        assertEquals(UmrWqe.MASK_KEY, Umr.MASK_KEY);
        assertEquals(UmrWqe.MASK_QPN, Umr.MASK_QPN);
        assertEquals(UmrWqe.MASK_LR, Umr.MASK_LR);
        assertEquals(UmrWqe.MASK_LW, Umr.MASK_LW);
        assertEquals(UmrWqe.MASK_RR, Umr.MASK_RR);
        assertEquals(UmrWqe.MASK_RW, Umr.MASK_RW);
        assertEquals(UmrWqe.MASK_A, Umr.MASK_A);
        assertEquals(UmrWqe.MASK_FREE, Umr.MASK_FREE);
    }
}
