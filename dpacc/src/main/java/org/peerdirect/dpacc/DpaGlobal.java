package org.peerdirect.dpacc;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * {@code __dpa_global__}: on a {@code static void f(long threadArg)} of a {@link DpaApp} class, an
 * event handler's entry point (registered with {@code flexio_func_register}, kind {@code GLOBAL},
 * an 8-byte argument); on a record, a type replicated on host and device that {@link DpaRpc}
 * methods may take as an argument (laid out as a C struct: little-endian, natural alignment).
 *
 * <p>Class retention: for the build only.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target({ElementType.METHOD, ElementType.TYPE})
public @interface DpaGlobal {

    /** The entry point's symbol; empty (the default) means the method's name. Ignored on a record. */
    String value() default "";
}
