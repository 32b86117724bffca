#!/usr/bin/env bash
# The device bitcode (libcco_device_sm<arch>.bc, built from the table in
# python/cco/ir/device_functions.py), for each arch built:
#  - it defines the table's functions and nothing else: no data (module
#    state), no undefined symbols (a call ptxas could not resolve);
#  - every entry has the table's signature, and pure entries only read memory;
#  - no function carries "no-builtins" (what -ffreestanding adds, and what
#    keeps LLVM from inlining into Triton's kernels);
#  - every inline asm of a barrier or warp collective is "convergent" (what
#    -fconvergent-functions adds), so LLVM never copies one into a branch
#    that only some threads take; still so after the link below;
#  - linked into a module of one kernel per entry the way Triton links it
#    (llvm-link --only-needed --internalize, then opt -O3), every call is
#    inlined (no missed-inline remark, no cco_ir_ left), and ptxas assembles
#    the result with no stack frame and no local memory: the GDA handle and
#    the barrier sessions rebuilt in each call fold into registers.
# Registered by tests/CMakeLists.txt as device.bitcode where the build made
# the bitcode; run with CCO_BIN=<build>/bin and CCO_SRC=<repo root>. Prints
# one line per check and ends with "N passed, N failed".
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
lib=$(cd "$bin/../lib" && pwd)
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/device_bitcode.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"
export PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
checker=$(dirname "$0")/bitcode_check.py

# The LLVM tools of the clang that built the bitcode (llvm-19 with clang-19).
tool() { # name: prints the newest versioned tool, or the plain one
  local v
  for v in 19 20 21 22; do command -v "$1-$v" >/dev/null && { echo "$1-$v"; return; }; done
  command -v "$1" || true
}
nm=$(tool llvm-nm) dis=$(tool llvm-dis) link=$(tool llvm-link) opt=$(tool opt) llc=$(tool llc)
for t in nm dis link opt llc; do
  [ -n "${!t}" ] || { echo "FAIL no $t here (scripts/install-deps.sh installs llvm-19)"; exit 1; }
done
find_nvptx_clang
find_nvcc
ptxas=${nvcc:+$(dirname "$nvcc")/ptxas}

shopt -s nullglob
files=("$lib"/libcco_device_sm*.bc)
[ ${#files[@]} -gt 0 ] || { echo "FAIL no $lib/libcco_device_sm*.bc (cmake --build: target cco_device_bc)"; exit 1; }
check "the build's wrappers are the table's" \
  bash -c 'python3 -c "from cco.ir.wrappers import c_source; print(c_source(), end=\"\")" | cmp - "$1"' _ \
  "$bin/../bitcode/cco_device_bc.c"
python3 "$checker" kernels "$tmp/kernels.c" >/dev/null

for bc in "${files[@]}"; do
  sm=$(basename "$bc" .bc); sm=sm_${sm#libcco_device_sm}
  check "$sm: the table's functions, no data, no undefined symbols" \
    bash -c '"$1" "$2" >"$3" && python3 "$4" symbols "$3"' _ "$nm" "$bc" "$tmp/nm.txt" "$checker"
  show 'functions'
  check "$sm: signatures and purity match the table; nothing marked no-builtins" \
    bash -c '"$1" "$2" -o "$3" && python3 "$4" signatures "$3" && ! grep -q "\"no-builtins\"" "$3"' _ \
    "$dis" "$bc" "$tmp/$sm.ll" "$checker"
  show 'signatures'
  check "$sm: every barrier's inline asm is convergent (built with -fconvergent-functions)" \
    python3 "$checker" convergent "$tmp/$sm.ll"
  show 'convergent'
  inlined() {
    "$nvptx_cc" --target=nvptx64-nvidia-cuda -march="$1" -std=c11 -nostdlibinc -O2 "${nvptx_flags[@]}" \
      -emit-llvm -c "$tmp/kernels.c" -o "$tmp/kernels.bc" || return 1
    "$link" --only-needed --internalize "$tmp/kernels.bc" "$bc" -o "$tmp/linked.bc" || return 1
    "$opt" -O3 -pass-remarks-missed=inline "$tmp/linked.bc" -o "$tmp/opt.bc" 2>"$tmp/remarks.txt" || return 1
    if [ -s "$tmp/remarks.txt" ]; then echo "missed inlining:"; head -5 "$tmp/remarks.txt"; return 1; fi
    "$dis" "$tmp/opt.bc" -o "$tmp/opt.ll" || return 1
    if grep -q '@cco_ir_' "$tmp/opt.ll"; then echo "calls left:"; grep -m3 '@cco_ir_' "$tmp/opt.ll"; return 1; fi
    python3 "$checker" convergent "$tmp/opt.ll" >"$tmp/conv.txt" || { echo "after inlining:"; cat "$tmp/conv.txt"; return 1; }
    echo "$(grep -c '^define' "$tmp/opt.ll") kernels, every wrapper inlined, its barriers still convergent"
  }
  if [ -z "$nvptx_cc" ]; then
    skip "$sm: inlining: no clang for NVPTX here"
    continue
  fi
  check "$sm: linked as Triton links it, every call inlined at -O3" inlined "$sm"
  show 'inlined'
  assembled() {
    "$llc" -march=nvptx64 -mcpu="$1" "$tmp/opt.bc" -o "$tmp/k.ptx" || return 1
    if grep -q '\.local' "$tmp/k.ptx"; then echo "local memory in the PTX"; return 1; fi
    "$ptxas" -arch="$1" -v "$tmp/k.ptx" -o "$tmp/k.cubin" 2>"$tmp/ptxas.txt" || { cat "$tmp/ptxas.txt"; return 1; }
    local frames nonzero
    frames=$(grep -c 'bytes stack frame' "$tmp/ptxas.txt")
    nonzero=$(grep 'bytes stack frame' "$tmp/ptxas.txt" | grep -vc ' 0 bytes stack frame, 0 bytes spill stores')
    [ "$nonzero" -eq 0 ] || { grep -B1 'bytes stack frame' "$tmp/ptxas.txt" | grep -v ' 0 bytes stack'; return 1; }
    echo "$frames kernels assembled, no stack frame, no spills, no local memory"
  }
  if [ -n "$ptxas" ] && [ -x "$ptxas" ]; then
    check "$sm: ptxas assembles the kernels: no stack frame, no local memory" assembled "$sm"
    show 'assembled'
  else
    skip "$sm: ptxas: no CUDA toolkit here"
  fi
done

echo "device_bitcode: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
