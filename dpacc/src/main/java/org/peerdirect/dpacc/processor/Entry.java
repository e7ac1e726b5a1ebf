package org.peerdirect.dpacc.processor;

import java.util.List;

/**
 * One entry point as the processor checked it: its symbol, kind, the user's method and its
 * parameters' layout ({@code args.size()} is the argument buffer's size; a handler's is one long).
 */
record Entry(String symbol, boolean rpc, String method, List<String> paramTypes, DType.Struct args) {

    /** The stub's constant: {@code echoHandler} becomes {@code ECHO_HANDLER}. */
    String constant() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < symbol.length(); i++) {
            char c = symbol.charAt(i);
            if (Character.isUpperCase(c) && i > 0 && !Character.isUpperCase(symbol.charAt(i - 1)) && symbol.charAt(i - 1) != '_') {
                b.append('_');
            }
            b.append(Character.toUpperCase(c));
        }
        return b.toString();
    }

    /** {@code packEchoHandler}. */
    String packer() {
        return "pack" + Character.toUpperCase(symbol.charAt(0)) + symbol.substring(1);
    }

    /** The parameter list as Java source: {@code long data, Ctx ctx}. */
    String signature() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < paramTypes.size(); i++) {
            b.append(i == 0 ? "" : ", ").append(paramTypes.get(i)).append(' ').append(args.members().get(i).name());
        }
        return b.toString();
    }
}
