/**
 * The uverbs objects the IB core owns (private): the user-facing device, context, PD, MR, CQ,
 * completion channel, QP, SRQ and AH, each holding one final reference to the driver's object of
 * the provider SPI, and the checks the core does once for every driver.
 */
package org.peerdirect.ib.core.uverbs;
