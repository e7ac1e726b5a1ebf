/**
 * FlexIO's host library ({@code libflexio}, {@code flexio.h}): DPA applications, processes, event
 * handlers, queues, windows, outboxes and message streams of a BlueField-3's DPA, driven from the
 * user's process over DevX. Java names map one to one to the C names.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">FlexIO SDK</a>
 */
@Export
@Version("0.1.0")
package org.peerdirect.flexio;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
