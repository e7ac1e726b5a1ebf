package org.peerdirect.dpacc;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * A DPA application (DPACC's {@code --app-name}): the top-level class whose {@link DpaGlobal} and
 * {@link DpaRpc} static methods are its entry points. {@code dpacc} generates beside it
 * {@code <Class>Stubs} (host: the {@code FlexioApp} and one {@code FlexioFunc} per entry point) and
 * {@code <Class>Trampolines} (device: the unpack trampolines the image's symbols name), and links
 * the image {@code META-INF/dpa/<name>.dpaimg}.
 *
 * <p>Class retention: the annotation is for the build; the image verifier never sees a reference to it.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.TYPE)
public @interface DpaApp {

    /** The application's name ({@code flexio_app_get_name}), also the image's file name: letters, digits, {@code _ . -}. */
    String value();
}
