package org.peerdirect.dpacc;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * {@code __dpa_rpc__}: a {@code static long f(...)} of a {@link DpaApp} class, called once by
 * {@code flexio_process_call} or a cmdq task ({@code flexio_func_pup_register}, kind {@code RPC}).
 * Parameters: {@code byte short char int long boolean} (a DPA address is a {@code long}) and
 * {@link DpaGlobal} records; they travel in an argument buffer laid out as a C struct of the
 * parameters (little-endian, natural alignment), packed on the host by the generated stub and
 * unpacked on the device by the generated trampoline.
 *
 * <p>Class retention: for the build only.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.METHOD)
public @interface DpaRpc {

    /** The entry point's symbol; empty (the default) means the method's name. */
    String value() default "";
}
