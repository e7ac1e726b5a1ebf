package org.peerdirect.doca;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.doca.dev.DocaDev;

/**
 * What DOCA Core needs of a {@code struct doca_dpa} (the DOCA DPA context, built in the
 * {@code doca-dpa} library on FlexIO): the device it runs on. DOCA Core accepts a DPA context as a
 * sync event's publisher or subscriber location and as a memory map's DPA range; until the DPA
 * library implements this type those locations are configuration only (their data path answers
 * {@link DocaError#DOCA_ERROR_NOT_SUPPORTED}).
 */
@ConsumerType
public interface DocaDpaContext {

    /** The device the DPA context was created on ({@code doca_dpa_create(dev, ...)}). */
    DocaDev dev();
}
