/**
 * What every peerdirect Gogo command shares: arguments parsed with errors in words
 * ({@code kernel:maps: expected a process id (integer), got 'abc'}) instead of Gogo's coercion
 * text, so a user and a script learn what was wrong without a stack trace.
 */
@Export
@Version("0.1.0")
package org.peerdirect.kernel.shell;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
