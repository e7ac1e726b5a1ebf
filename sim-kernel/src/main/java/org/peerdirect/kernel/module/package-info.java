/**
 * Kernel modules: the reference count a module holds while something depends on it
 * ({@code try_module_get} / {@code __module_get} / {@code module_put}), and the refusal of
 * {@code rmmod} while it is not zero. A bundle that is a kernel module of the original (say
 * {@code nvidia-peermem}) loads its {@link org.peerdirect.kernel.module.KernelModule} through the
 * bundle-scoped {@link org.peerdirect.kernel.module.KernelModules} service; {@code kernel:lsmod},
 * {@code kernel:rmmod} and {@code kernel:modprobe} act on the bundles so loaded.
 */
@Export
@Version("0.1.0")
package org.peerdirect.kernel.module;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
