package org.peerdirect.dpacc.processor;

import java.io.IOException;
import java.io.Writer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import javax.annotation.processing.AbstractProcessor;
import javax.annotation.processing.Messager;
import javax.annotation.processing.RoundEnvironment;
import javax.annotation.processing.SupportedAnnotationTypes;
import javax.lang.model.SourceVersion;
import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.Modifier;
import javax.lang.model.element.NestingKind;
import javax.lang.model.element.RecordComponentElement;
import javax.lang.model.element.TypeElement;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.DeclaredType;
import javax.lang.model.type.TypeKind;
import javax.lang.model.type.TypeMirror;
import javax.tools.Diagnostic;
import javax.tools.FileObject;
import javax.tools.StandardLocation;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.dpacc.link.AppDescriptor;

/**
 * DPACC's front end as an annotation processor: checks each {@link DpaApp} class's entry points
 * and generates, per app, the host stubs ({@link StubWriter}), the device trampolines
 * ({@link TrampolineWriter}) and the descriptor the packager links the image from. Every mistake
 * is a compile error on the element at fault, its message naming it; an app with an error gets
 * nothing generated (so no stub of a wrong shape is ever compiled).
 */
@SupportedAnnotationTypes({"org.peerdirect.dpacc.DpaApp", "org.peerdirect.dpacc.DpaGlobal", "org.peerdirect.dpacc.DpaRpc"})
public final class DpaccProcessor extends AbstractProcessor {

    /** App names become file names: no path, no spaces. */
    private static final Pattern APP_NAME = Pattern.compile("[A-Za-z0-9_.-]{1,200}");

    /** Apps seen in earlier rounds of this compilation: name → class (two classes may not share a name). */
    private final Map<String, String> apps = new HashMap<>();

    @Override
    public SourceVersion getSupportedSourceVersion() {
        return SourceVersion.latestSupported();
    }

    @Override
    public boolean process(Set<? extends TypeElement> annotations, RoundEnvironment round) {
        boolean misplaced = false;
        for (Element e : round.getElementsAnnotatedWith(DpaGlobal.class)) {
            misplaced |= !checkPlacement(e, "@DpaGlobal");
        }
        for (Element e : round.getElementsAnnotatedWith(DpaRpc.class)) {
            misplaced |= !checkPlacement(e, "@DpaRpc");
        }
        for (Element e : round.getElementsAnnotatedWith(DpaApp.class)) {
            app((TypeElement) e, !misplaced); // the compilation fails anyway: generate nothing to compile
        }
        return true;
    }

    private Messager log() {
        return processingEnv.getMessager();
    }

    private void error(Element e, String msg) {
        log().printMessage(Diagnostic.Kind.ERROR, "dpacc: " + msg, e);
    }

    /** False after reporting an entry point outside a {@code @DpaApp} class, or {@code @DpaGlobal} on a type that is not a record. */
    private boolean checkPlacement(Element e, String what) {
        if (e.getKind() == ElementKind.METHOD) {
            if (e.getEnclosingElement().getAnnotation(DpaApp.class) == null) {
                error(e, what + " " + e.getSimpleName() + " is in " + e.getEnclosingElement().getSimpleName()
                        + ", which is not a @DpaApp class (entry points belong to their application's class)");
                return false;
            }
        } else if (e.getKind() != ElementKind.RECORD) {
            error(e, what + " on " + e.getKind().toString().toLowerCase(java.util.Locale.ROOT) + " " + e.getSimpleName()
                    + ": only a record may be a @DpaGlobal type (a replicated argument type)");
            return false;
        }
        return true;
    }

    private void app(TypeElement app, boolean generate) {
        String name = app.getAnnotation(DpaApp.class).value();
        String cls = app.getQualifiedName().toString();
        int errors = 0;
        if (app.getNestingKind() != NestingKind.TOP_LEVEL || app.getKind() != ElementKind.CLASS) {
            error(app, "@DpaApp " + app.getSimpleName() + " must be a top-level class (its stubs are generated beside it)");
            errors++;
        }
        if (!APP_NAME.matcher(name).matches()) {
            error(app, "@DpaApp name \"" + name + "\" of " + app.getSimpleName() + ": letters, digits, '_', '.', '-' only");
            errors++;
        }
        String other = apps.putIfAbsent(name, cls);
        if (other != null && !other.equals(cls)) {
            error(app, "@DpaApp name \"" + name + "\" of " + cls + " is taken by " + other);
            errors++;
        }
        Map<String, Entry> entries = new LinkedHashMap<>();
        Map<String, String> constants = new HashMap<>();
        for (String reserved : StubWriter.RESERVED) {
            constants.put(reserved, "a name the stub class uses itself");
        }
        for (Element m : app.getEnclosedElements()) {
            if (m.getKind() != ElementKind.METHOD) {
                continue;
            }
            boolean global = m.getAnnotation(DpaGlobal.class) != null;
            boolean rpc = m.getAnnotation(DpaRpc.class) != null;
            if (!global && !rpc) {
                continue;
            }
            if (global && rpc) {
                error(m, m.getSimpleName() + " is both @DpaGlobal and @DpaRpc");
                errors++;
                continue;
            }
            Entry entry = global ? global((ExecutableElement) m) : rpc((ExecutableElement) m);
            if (entry == null) {
                errors++;
                continue;
            }
            Entry dup = entries.putIfAbsent(entry.symbol(), entry);
            String clash = constants.putIfAbsent(entry.constant(), entry.symbol());
            if (dup != null) {
                error(m, "duplicate symbol " + entry.symbol() + " in @DpaApp " + name + ": " + m.getSimpleName()
                        + " and " + dup.method() + " (give one a symbol: @DpaRpc(\"other\"))");
                errors++;
            } else if (clash != null) {
                error(m, "symbol " + entry.symbol() + "'s stub constant " + entry.constant() + " clashes with " + clash);
                errors++;
            }
        }
        if (errors == 0 && generate) {
            generate(app, name, List.copyOf(entries.values()));
        }
    }

    private Entry global(ExecutableElement m) {
        String where = "@DpaGlobal handler " + m.getSimpleName();
        if (!shape(m, where)) {
            return null;
        }
        if (m.getReturnType().getKind() != TypeKind.VOID) {
            error(m, where + " must return void, not " + m.getReturnType());
            return null;
        }
        List<? extends VariableElement> ps = m.getParameters();
        if (ps.size() != 1 || ps.get(0).asType().getKind() != TypeKind.LONG) {
            error(m, where + " must take exactly one long (the thread argument), not (" + params(m) + ")");
            return null;
        }
        String sym = symbol(m, m.getAnnotation(DpaGlobal.class).value(), where);
        if (sym == null) {
            return null;
        }
        String p = ps.get(0).getSimpleName().toString();
        return new Entry(sym, false, m.getSimpleName().toString(), List.of("long"),
                DType.Struct.layout(null, List.of(p), List.of(DType.Prim.LONG)));
    }

    private Entry rpc(ExecutableElement m) {
        String where = "@DpaRpc " + m.getSimpleName();
        if (!shape(m, where)) {
            return null;
        }
        if (m.getReturnType().getKind() != TypeKind.LONG) {
            error(m, where + " must return long (the uint64_t result), not " + m.getReturnType());
            return null;
        }
        List<String> names = new ArrayList<>();
        List<DType> types = new ArrayList<>();
        List<String> javaTypes = new ArrayList<>();
        boolean ok = true;
        for (VariableElement p : m.getParameters()) {
            DType t = type(p.asType(), p, where + " parameter " + p.getSimpleName(), new ArrayDeque<>());
            ok &= t != null;
            names.add(p.getSimpleName().toString());
            types.add(t);
            javaTypes.add(t instanceof DType.Struct st ? st.javaType() : t instanceof DType.Prim pr ? pr.java : null);
        }
        String sym = symbol(m, m.getAnnotation(DpaRpc.class).value(), where);
        if (!ok || sym == null) {
            return null;
        }
        return new Entry(sym, true, m.getSimpleName().toString(), javaTypes, DType.Struct.layout(null, names, types));
    }

    /** Static, not private, no type parameters, no varargs: the trampoline beside it calls it directly. */
    private boolean shape(ExecutableElement m, String where) {
        if (!m.getModifiers().contains(Modifier.STATIC)) {
            error(m, where + " must be static (DPA entry points are functions)");
            return false;
        }
        if (m.getModifiers().contains(Modifier.PRIVATE)) {
            error(m, where + " must not be private (the generated trampoline calls it)");
            return false;
        }
        if (!m.getTypeParameters().isEmpty() || m.isVarArgs()) {
            error(m, where + " may not be generic or varargs");
            return false;
        }
        return true;
    }

    private String symbol(ExecutableElement m, String given, String where) {
        String sym = given.isEmpty() ? m.getSimpleName().toString() : given;
        if (!SourceVersion.isIdentifier(sym) || SourceVersion.isKeyword(sym)) {
            error(m, where + ": symbol \"" + sym + "\" is not an identifier");
            return null;
        }
        return sym;
    }

    private static String params(ExecutableElement m) {
        StringBuilder b = new StringBuilder();
        for (VariableElement p : m.getParameters()) {
            b.append(b.isEmpty() ? "" : ", ").append(p.asType());
        }
        return b.toString();
    }

    /**
     * The layout of an argument's type, or null after reporting on {@code at} why it cannot cross:
     * float and double ({@code java.lang.Float}/{@code Double} are not on the DPA's allowlist, so a
     * trampoline could not rebuild them), references other than {@code @DpaGlobal} records, generic
     * or recursive records.
     */
    private DType type(TypeMirror t, Element at, String what, Deque<String> visiting) {
        switch (t.getKind()) {
            case BYTE: return DType.Prim.BYTE;
            case BOOLEAN: return DType.Prim.BOOLEAN;
            case SHORT: return DType.Prim.SHORT;
            case CHAR: return DType.Prim.CHAR;
            case INT: return DType.Prim.INT;
            case LONG: return DType.Prim.LONG;
            case DECLARED: return record((DeclaredType) t, at, what, visiting);
            default:
                error(at, what + " has unsupported type " + t + " (an argument is byte, short, char, int, long,"
                        + " boolean, a DPA address as long, or a @DpaGlobal record; pass a float's bits as an int)");
                return null;
        }
    }

    private DType record(DeclaredType t, Element at, String what, Deque<String> visiting) {
        TypeElement r = (TypeElement) t.asElement();
        String rn = r.getQualifiedName().toString();
        if (r.getKind() != ElementKind.RECORD) {
            error(at, what + " has unsupported type " + t + " (not a primitive, nor a @DpaGlobal record)");
            return null;
        }
        if (r.getAnnotation(DpaGlobal.class) == null) {
            error(at, what + ": record " + rn + " is not @DpaGlobal (annotate it to replicate it on the DPA)");
            return null;
        }
        if (r.getModifiers().contains(Modifier.PRIVATE) || !r.getTypeParameters().isEmpty()) {
            error(at, what + ": record " + rn + " may be neither private nor generic");
            return null;
        }
        if (visiting.contains(rn)) {
            error(at, what + ": record " + rn + " contains itself (" + String.join(" > ", visiting) + ")");
            return null;
        }
        visiting.addLast(rn);
        List<String> names = new ArrayList<>();
        List<DType> types = new ArrayList<>();
        boolean ok = true;
        for (RecordComponentElement c : r.getRecordComponents()) {
            DType ct = type(c.asType(), at, what + " (" + r.getSimpleName() + "." + c.getSimpleName() + ")", visiting);
            ok &= ct != null;
            names.add(c.getSimpleName().toString());
            types.add(ct);
        }
        visiting.removeLast();
        return ok ? DType.Struct.layout(rn, names, types) : null;
    }

    private void generate(TypeElement app, String name, List<Entry> entries) {
        String pkg = processingEnv.getElementUtils().getPackageOf(app).getQualifiedName().toString();
        String simple = app.getSimpleName().toString();
        String stubs = simple + "Stubs";
        String tramps = simple + "Trampolines";
        String prefix = pkg.isEmpty() ? "" : pkg + ".";
        try {
            write(prefix + stubs, new StubWriter(pkg, simple, stubs, name, entries).source(), app);
            write(prefix + tramps, new TrampolineWriter(pkg, simple, tramps, name, entries).source(), app);
            List<AppDescriptor.Symbol> syms = entries.stream()
                    .map(e -> new AppDescriptor.Symbol(e.symbol(), e.rpc(), e.args().size())).toList();
            String desc = new AppDescriptor(name, prefix + simple, prefix + tramps, syms).format();
            FileObject f = processingEnv.getFiler().createResource(StandardLocation.CLASS_OUTPUT, "",
                    AppDescriptor.DIR + name + AppDescriptor.SUFFIX, app);
            try (Writer w = f.openWriter()) {
                w.write(desc);
            }
        } catch (IOException e) {
            error(app, "cannot write the generated files of @DpaApp " + name + ": " + e);
        }
    }

    private void write(String cls, String source, Element origin) throws IOException {
        try (Writer w = processingEnv.getFiler().createSourceFile(cls, origin).openWriter()) {
            w.write(source);
        }
    }
}
