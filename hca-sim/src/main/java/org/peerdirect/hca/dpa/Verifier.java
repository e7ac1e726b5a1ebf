package org.peerdirect.hca.dpa;

import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.CodeElement;
import java.lang.classfile.CodeModel;
import java.lang.classfile.FieldModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.instruction.ConstantInstruction;
import java.lang.classfile.instruction.ExceptionCatch;
import java.lang.classfile.instruction.FieldInstruction;
import java.lang.classfile.instruction.InvokeDynamicInstruction;
import java.lang.classfile.instruction.InvokeInstruction;
import java.lang.classfile.instruction.MonitorInstruction;
import java.lang.classfile.instruction.NewMultiArrayInstruction;
import java.lang.classfile.instruction.NewObjectInstruction;
import java.lang.classfile.instruction.NewReferenceArrayInstruction;
import java.lang.classfile.instruction.TypeCheckInstruction;
import java.lang.constant.ClassDesc;
import java.lang.constant.MethodTypeDesc;
import java.lang.reflect.AccessFlag;
import java.util.Set;

/**
 * The image verifier: DPA code must not reach host objects. Each refusal names its rule and the
 * class and method:
 * <ul>
 * <li>{@code reflection}: {@code Class}, {@code java.lang.reflect}, {@code java.lang.invoke}
 *     (beyond javac's bootstraps), class or method-handle constants;</li>
 * <li>{@code threads}: {@code Thread}, {@code ThreadLocal}, {@code ScopedValue},
 *     {@code java.util.concurrent}, monitors and synchronized methods;</li>
 * <li>{@code system}: {@code System}, {@code Runtime}, processes, {@code java.lang.foreign},
 *     JDK internals, native methods;</li>
 * <li>{@code io}: {@code java.io}, {@code java.nio}, {@code java.net};</li>
 * <li>{@code host-package}: any other class outside the image, the allowed library packages and
 *     the {@code java.lang} allowlist; {@code isa-internal}: the ISA's {@code Hart} (device code
 *     calls {@code Dpa});</li>
 * <li>{@code package-spoof}: an image class in {@code java.*} or in an allowed library package;</li>
 * <li>{@code mutable-static}: a static field that is not final, or a static final array (a
 *     process's mutable data lives in DPA memory, where the memory model sees it);</li>
 * <li>{@code catch-throwable}: a handler for {@code Throwable}, an {@code Error} or everything
 *     ({@code finally}): the RTOS unwinds {@code reschedule}/{@code finish} through the stack, and
 *     device code must not run after them;</li>
 * <li>{@code loop-without-call}: a loop whose body calls nothing. The RTOS preempts, counts for
 *     the watchdog and stops a thread at its ISA calls; a loop without any call could spin past
 *     all three (a heuristic: a loop calling only JDK methods is not caught).</li>
 * </ul>
 */
final class Verifier {

    private static final Set<String> BOOTSTRAPS = Set.of("java/lang/invoke/LambdaMetafactory",
            "java/lang/invoke/StringConcatFactory", "java/lang/runtime/ObjectMethods");

    private final Image image;
    private final LoaderPolicy policy;

    Verifier(Image image, LoaderPolicy policy) {
        this.image = image;
        this.policy = policy;
    }

    void verify() throws ImageRejected {
        for (var c : image.classes().entrySet()) {
            verifyClass(c.getKey().replace('.', '/'), c.getValue());
        }
    }

    private void verifyClass(String name, byte[] bytes) throws ImageRejected {
        ClassModel cm;
        try {
            cm = ClassFile.of().parse(bytes);
        } catch (IllegalArgumentException e) {
            throw new ImageRejected("malformed-class", name, e.getMessage());
        }
        if (!cm.thisClass().asInternalName().equals(name)) {
            throw new ImageRejected("malformed-class", name, "the class file defines " + cm.thisClass().asInternalName());
        }
        if (name.startsWith("java/") || name.startsWith("javax/") || policy.libraryOf(name) != null) {
            throw new ImageRejected("package-spoof", name, "an image class may not be in a JDK or device-library package");
        }
        String where = name + ".<class>";
        if (cm.superclass().isPresent()) {
            ref(where, cm.superclass().get().asInternalName());
        }
        for (ClassEntry i : cm.interfaces()) {
            ref(where, i.asInternalName());
        }
        for (FieldModel f : cm.fields()) {
            String fw = name + "." + f.fieldName().stringValue();
            ref(fw, f.fieldTypeSymbol());
            boolean isStatic = f.flags().has(AccessFlag.STATIC);
            if (isStatic && (!f.flags().has(AccessFlag.FINAL) || f.fieldTypeSymbol().isArray())) {
                throw new ImageRejected("mutable-static", fw, "a mutable static field (process data belongs in DPA memory)");
            }
        }
        for (MethodModel m : cm.methods()) {
            String mw = name + "." + m.methodName().stringValue();
            if (m.flags().has(AccessFlag.NATIVE)) {
                throw new ImageRejected("system", mw, "a native method");
            }
            if (m.flags().has(AccessFlag.SYNCHRONIZED)) {
                throw new ImageRejected("threads", mw, "a synchronized method");
            }
            ref(mw, m.methodTypeSymbol());
            if (m.code().isPresent()) {
                code(mw, m.code().get());
            }
        }
    }

    private void code(String where, CodeModel code) throws ImageRejected {
        java.util.List<ExceptionCatch> catches = new java.util.ArrayList<>();
        java.util.Map<java.lang.classfile.Label, Integer> labels = new java.util.HashMap<>();
        int lastCall = -1;
        int index = 0;
        for (CodeElement e : code) {
            index++;
            if (e instanceof java.lang.classfile.instruction.LabelTarget l) {
                labels.put(l.label(), index);
            } else if (e instanceof InvokeInstruction || e instanceof InvokeDynamicInstruction) {
                lastCall = index;
            } else if (e instanceof java.lang.classfile.instruction.BranchInstruction b) {
                Integer target = labels.get(b.target());
                if (target != null && lastCall < target) {
                    throw new ImageRejected("loop-without-call", where, "a loop that calls nothing (no ISA call lets"
                            + " the RTOS preempt it, count it for the watchdog or stop it)");
                }
            }
            switch (e) {
                case InvokeInstruction i -> {
                    ref(where, i.owner().asInternalName());
                    ref(where, i.typeSymbol());
                }
                case FieldInstruction f -> {
                    ref(where, f.owner().asInternalName());
                    ref(where, f.typeSymbol());
                }
                case NewObjectInstruction n -> ref(where, n.className().asInternalName());
                case NewReferenceArrayInstruction n -> ref(where, n.componentType().asInternalName());
                case NewMultiArrayInstruction n -> ref(where, n.arrayType().asInternalName());
                case TypeCheckInstruction t -> ref(where, t.type().asInternalName());
                case ConstantInstruction c when !(c.constantValue() instanceof Number || c.constantValue() instanceof String) ->
                    throw new ImageRejected("reflection", where, "a constant of " + c.constantValue());
                case InvokeDynamicInstruction d -> {
                    String owner = internal(d.bootstrapMethod().owner());
                    if (!BOOTSTRAPS.contains(owner)) {
                        throw new ImageRejected("reflection", where, "invokedynamic bootstrap " + owner);
                    }
                    ref(where, d.typeSymbol());
                }
                case MonitorInstruction m -> throw new ImageRejected("threads", where, "a monitor (synchronized block)");
                case ExceptionCatch c -> catches.add(c); // after the instructions: a monitor's catch-all is "threads"
                default -> {
                }
            }
        }
        for (ExceptionCatch c : catches) {
            catchType(where, c);
        }
    }

    private static void catchType(String where, ExceptionCatch c) throws ImageRejected {
        if (c.catchType().isEmpty()) {
            throw new ImageRejected("catch-throwable", where, "a catch-all handler (finally, try-with-resources)");
        }
        String t = c.catchType().get().asInternalName();
        if (t.equals("java/lang/Throwable") || t.equals("java/lang/Error") || t.endsWith("Error")) {
            throw new ImageRejected("catch-throwable", where, "catches " + t.replace('/', '.'));
        }
    }

    private void ref(String where, MethodTypeDesc t) throws ImageRejected {
        ref(where, t.returnType());
        for (ClassDesc p : t.parameterList()) {
            ref(where, p);
        }
    }

    private void ref(String where, ClassDesc d) throws ImageRejected {
        while (d.isArray()) {
            d = d.componentType();
        }
        if (!d.isPrimitive()) {
            ref(where, internal(d));
        }
    }

    private static String internal(ClassDesc d) {
        String s = d.descriptorString();
        return s.substring(1, s.length() - 1);
    }

    /** Checks one referenced class (internal name, arrays allowed). */
    private void ref(String where, String cls) throws ImageRejected {
        String c = cls;
        if (c.startsWith("[")) {
            ClassDesc d = ClassDesc.ofDescriptor(c);
            ref(where, d);
            return;
        }
        if (image.classes().containsKey(c.replace('/', '.'))) {
            return;
        }
        String rule = rule(c);
        if (rule != null) {
            throw new ImageRejected(rule, where, "references " + c.replace('/', '.'));
        }
    }

    /** The rule {@code c} breaks, or null when DPA code may use it. */
    private String rule(String c) {
        if (c.equals("org/peerdirect/hca/dpa/isa/Hart") || c.startsWith("org/peerdirect/hca/dpa/isa/Hart$")) {
            return "isa-internal";
        }
        if (policy.javaLang().contains(c) || policy.libraryOf(c) != null) {
            return null;
        }
        if (c.equals("java/lang/Class") || c.equals("java/lang/ClassLoader") || c.startsWith("java/lang/reflect/")
                || c.startsWith("java/lang/invoke/") || c.equals("java/lang/Module") || c.equals("java/lang/StackWalker")) {
            return "reflection";
        }
        if (c.startsWith("java/lang/Thread") || c.equals("java/lang/ScopedValue") || c.equals("java/lang/Runnable")
                || c.startsWith("java/util/concurrent/") || c.equals("java/lang/InheritableThreadLocal")) {
            return "threads";
        }
        if (c.equals("java/lang/System") || c.equals("java/lang/Runtime") || c.startsWith("java/lang/Process")
                || c.startsWith("java/lang/foreign/") || c.startsWith("sun/") || c.startsWith("jdk/")
                || c.equals("java/lang/SecurityManager")) {
            return "system";
        }
        if (c.startsWith("java/io/") || c.startsWith("java/nio/") || c.startsWith("java/net/")) {
            return "io";
        }
        return "host-package";
    }
}
