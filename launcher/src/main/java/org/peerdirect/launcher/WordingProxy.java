package org.peerdirect.launcher;

import static java.lang.constant.ConstantDescs.CD_Object;
import static java.lang.constant.ConstantDescs.CD_String;
import static java.lang.constant.ConstantDescs.CD_void;

import java.lang.classfile.ClassFile;
import java.lang.constant.ClassDesc;
import java.lang.constant.ConstantDescs;
import java.lang.constant.MethodTypeDesc;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.List;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;

/**
 * A subclass of Gogo's {@code org.apache.felix.gogo.runtime.CommandProxy}, made at run time in the
 * runtime bundle's class loader (the launcher cannot compile against a class inside a bundle):
 * its {@code execute} hands the call to an {@link InvocationHandler}, which calls
 * {@code superExecute} (the proxy's own behaviour: the service's object, Gogo's coercion, the
 * method) and words what comes back. It has to be a {@code CommandProxy}: gogo.jline's
 * {@code help} describes only those, through {@code getTarget()}.
 *
 * <pre>
 * public final class PeerdirectWordingProxy extends CommandProxy {
 *     private final InvocationHandler handler;
 *     public PeerdirectWordingProxy(BundleContext c, ServiceReference r, String f, InvocationHandler h) { super(c, r, f); handler = h; }
 *     public Object execute(CommandSession s, List a) { return handler.invoke(this, null, new Object[] {s, a}); }
 *     public Object superExecute(CommandSession s, List a) throws Exception { return super.execute(s, a); }
 * }
 * </pre>
 */
final class WordingProxy {

    static final String COMMAND_PROXY = "org.apache.felix.gogo.runtime.CommandProxy";
    private static final String NAME = "org.apache.felix.gogo.runtime.PeerdirectWordingProxy";
    private static final ClassDesc CD_PROXY = ClassDesc.of(COMMAND_PROXY);
    private static final ClassDesc CD_SELF = ClassDesc.of(NAME);
    private static final ClassDesc CD_SESSION = ClassDesc.of("org.apache.felix.service.command.CommandSession");
    private static final ClassDesc CD_HANDLER = ClassDesc.of(InvocationHandler.class.getName());
    private static final ClassDesc CD_LIST = ClassDesc.of(List.class.getName());
    private static final MethodTypeDesc SUPER_INIT = MethodTypeDesc.of(CD_void,
            ClassDesc.of(BundleContext.class.getName()), ClassDesc.of(ServiceReference.class.getName()), CD_String);
    private static final MethodTypeDesc EXECUTE = MethodTypeDesc.of(CD_Object, CD_SESSION, CD_LIST);

    /** The subclass, once per runtime bundle revision (one CommandProxy class each). */
    private static final ClassValue<Class<?>> SUBCLASS = new ClassValue<>() {
        @Override
        protected Class<?> computeValue(Class<?> commandProxy) {
            try {
                return MethodHandles.privateLookupIn(commandProxy, MethodHandles.lookup()).defineClass(bytes());
            } catch (IllegalAccessException e) {
                throw new IllegalStateException("cannot define a CommandProxy subclass in Gogo's runtime", e);
            }
        }
    };

    private WordingProxy() {
    }

    private static byte[] bytes() {
        return ClassFile.of().build(CD_SELF, cb -> {
            cb.withFlags(ClassFile.ACC_PUBLIC | ClassFile.ACC_FINAL | ClassFile.ACC_SUPER);
            cb.withSuperclass(CD_PROXY);
            cb.withField("handler", CD_HANDLER, ClassFile.ACC_PRIVATE | ClassFile.ACC_FINAL);
            MethodTypeDesc init = SUPER_INIT.insertParameterTypes(3, CD_HANDLER);
            cb.withMethodBody(ConstantDescs.INIT_NAME, init, ClassFile.ACC_PUBLIC, code -> code
                    .aload(0).aload(1).aload(2).aload(3)
                    .invokespecial(CD_PROXY, ConstantDescs.INIT_NAME, SUPER_INIT)
                    .aload(0).aload(4).putfield(CD_SELF, "handler", CD_HANDLER)
                    .return_());
            // straight-line code: no branch, so no stack map frames are needed
            cb.withMethodBody("execute", EXECUTE, ClassFile.ACC_PUBLIC, code -> code
                    .aload(0).getfield(CD_SELF, "handler", CD_HANDLER)
                    .aload(0).aconst_null()
                    .iconst_2().anewarray(CD_Object)
                    .dup().iconst_0().aload(1).aastore()
                    .dup().iconst_1().aload(2).aastore()
                    .invokeinterface(CD_HANDLER, "invoke", MethodTypeDesc.of(CD_Object, CD_Object,
                            ClassDesc.of(Method.class.getName()), CD_Object.arrayType()))
                    .areturn());
            cb.withMethodBody("superExecute", EXECUTE, ClassFile.ACC_PUBLIC, code -> code
                    .aload(0).aload(1).aload(2)
                    .invokespecial(CD_PROXY, "execute", EXECUTE)
                    .areturn());
        });
    }

    /** A proxy for {@code function} of the command service {@code ref} whose calls go to {@code handler}. */
    static Object create(Class<?> commandProxy, BundleContext ctx, ServiceReference<?> ref, String function,
            InvocationHandler handler) throws ReflectiveOperationException {
        return SUBCLASS.get(commandProxy)
                .getConstructor(BundleContext.class, ServiceReference.class, String.class, InvocationHandler.class)
                .newInstance(ctx, ref, function, handler);
    }

    /** Gogo's own {@code CommandProxy.execute}; what the command threw comes as the InvocationTargetException's cause. */
    static Object superExecute(Object proxy, Object session, Object args) throws ReflectiveOperationException {
        for (Method m : proxy.getClass().getMethods()) {
            if (m.getName().equals("superExecute")) {
                return m.invoke(proxy, session, args);
            }
        }
        throw new NoSuchMethodException("superExecute");
    }

    /** The class of the command object behind the proxy (got and released again, as Gogo's help does). */
    static Class<?> targetType(Object proxy) throws ReflectiveOperationException {
        Object target = proxy.getClass().getMethod("getTarget").invoke(proxy);
        try {
            return target == null ? Object.class : target.getClass();
        } finally {
            proxy.getClass().getMethod("ungetTarget").invoke(proxy);
        }
    }
}
