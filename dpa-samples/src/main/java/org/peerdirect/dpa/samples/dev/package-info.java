/** The samples' DPA programs (dpacc's annotations), linked with flexio-dev into images at build time. Private. */
package org.peerdirect.dpa.samples.dev;
