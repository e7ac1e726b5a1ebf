/**
 * Test fixtures of ib-core's own tests (test sources only): a machine ({@link org.peerdirect.ib.core.testing.Rig})
 * and the smallest DMA device driver that registers umems ({@link org.peerdirect.ib.core.testing.TestDmaDevice}).
 */
package org.peerdirect.ib.core.testing;
