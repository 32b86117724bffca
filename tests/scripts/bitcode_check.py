"""Checks of the device bitcode against the table it was generated from
(python/cco/ir/device_functions.py); run by tests/scripts/device_bitcode.sh.

    bitcode_check.py symbols NM_OUTPUT     llvm-nm: the table's functions, nothing else
    bitcode_check.py signatures LL_FILE    llvm-dis: every entry's types; pure ones read-only
    bitcode_check.py convergent LL_FILE    llvm-dis: every barrier's inline asm is convergent
    bitcode_check.py kernels OUT_C         a C file with one kernel calling each entry

Exits 1 with one line per problem.
"""
import re
import sys

from cco.ir.device_functions import C_TYPES, CCO_DEVICE_FUNCTIONS, I32, I64, U64

LLVM_TYPES = {U64: "i64", I64: "i64", I32: "i32"}


def check_symbols(path):
    problems = []
    defined = set()
    for line in open(path):
        fields = line.split()
        if not fields:
            continue
        kind, name = fields[-2], fields[-1]
        if kind == "T":
            defined.add(name)
        else:  # data (D, B, R, C, V ...) is module state; U an unresolved call
            problems.append(f"symbol {name} of kind {kind}: only function definitions belong in the bitcode")
    for name in sorted(defined - set(CCO_DEVICE_FUNCTIONS)):
        problems.append(f"{name} is defined but not in the table")
    for name in sorted(set(CCO_DEVICE_FUNCTIONS) - defined):
        problems.append(f"{name} is in the table but not defined")
    return problems, f"{len(defined)} functions, all in the table; no data, no undefined symbols"


def check_signatures(path):
    text = open(path).read()
    attrs = dict(re.findall(r"^attributes (#\d+) = \{ (.*) \}$", text, re.M))
    found = {}
    for m in re.finditer(r"^define [^@]*?\b(i32|i64|void) @(\w+)\(([^)]*)\)[^#{]*(#\d+)?", text, re.M):
        found[m.group(2)] = (m.group(1), [p.split()[0] for p in m.group(3).split(",") if p.strip()], m.group(4))
    problems = []
    for sym, fn in CCO_DEVICE_FUNCTIONS.items():
        if sym not in found:
            problems.append(f"{sym}: no definition")
            continue
        ret, params, group = found[sym]
        want = (LLVM_TYPES[fn.ret], [LLVM_TYPES[t] for t in fn.arg_types])
        if (ret, params) != want:
            problems.append(f"{sym}: bitcode {ret}({', '.join(params)}), table {want[0]}({', '.join(want[1])})")
        memory = re.search(r"memory\(([^)]*)\)", attrs.get(group, ""))
        if fn.pure and (not memory or "write" in memory.group(1) or "readwrite" in memory.group(1)):
            problems.append(f"{sym}: pure in the table, but the compiler says it may write memory "
                            f"({memory.group(0) if memory else 'no memory attribute'})")
    pure = sum(fn.pure for fn in CCO_DEVICE_FUNCTIONS.values())
    return problems, f"{len(CCO_DEVICE_FUNCTIONS)} signatures match; {pure} pure entries only read memory"


# Instructions that every thread of a block (bar.sync, bar.red) or lane of a
# warp must execute together, as the same instruction.
COLLECTIVE = re.compile(r"\b(bar|barrier)(\.cta)?\.(sync|red|arrive)\b|\b(bar\.warp|shfl|redux|vote|match)\.sync\b")


def check_convergent(path):
    """LLVM may copy an inline asm that is not "convergent" into both arms
    of a branch, so that the threads of a block reach different copies of a
    barrier (clang marks asm convergent for C only with
    -fconvergent-functions)."""
    text = open(path).read()
    attrs = dict(re.findall(r"^attributes (#\d+) = \{ (.*) \}$", text, re.M))
    problems, n = [], 0
    for line in text.splitlines():
        m = re.search(r'\basm (?:sideeffect )?"([^"]*)", "[^"]*"\([^)]*\)\s*(#\d+)?', line)
        if not m or not COLLECTIVE.search(m.group(1)):
            continue
        n += 1
        if "convergent" not in attrs.get(m.group(2) or "", ""):
            problems.append(f"not convergent: {COLLECTIVE.search(m.group(1)).group(0)} in {line.strip()[:120]}")
    if not n:
        problems.append("no barrier found: the pattern no longer matches the file")
    summary = f"{n} barrier and warp-collective asm calls, {n - len(problems)} of them convergent"
    return problems[:5], summary


def write_kernels(path):
    with open(path, "w") as out:
        out.write("#include <stdint.h>\n/* One kernel per bitcode function, as a Triton kernel calls it. */\n")
        for sym, fn in CCO_DEVICE_FUNCTIONS.items():
            params = [f"{C_TYPES[t]} a{i}" for i, t in enumerate(fn.arg_types)]
            decl = ", ".join(params) or "void"
            args = ", ".join(f"a{i}" for i in range(len(params)))
            out.write(f"extern {C_TYPES[fn.ret]} {sym}({decl});\n")
            out.write(f"__attribute__((nvptx_kernel)) void k_{sym}({', '.join(params + [C_TYPES[fn.ret] + '* out'])}) "
                      f"{{ *out = {sym}({args}); }}\n")
    return [], f"{len(CCO_DEVICE_FUNCTIONS)} kernels"


def main():
    what, path = sys.argv[1], sys.argv[2]
    problems, summary = {"symbols": check_symbols, "signatures": check_signatures, "convergent": check_convergent,
                         "kernels": write_kernels}[what](path)
    for p in problems:
        print(p)
    print(("FAILED: " if problems else "") + summary)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
