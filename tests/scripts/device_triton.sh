#!/usr/bin/env bash
# Triton compiles every kernel of examples/ir, tests/gpu/triton_kernels.py
# and bench/bench_triton.py for sm_90 without a GPU, linked with the bitcode
# of this build as the GPU machine finds it (no clang there: CCO_DISABLE_JIT,
# the file next to CCO_LIBRARY), and finds no cco_ir_ call left in the PTX
# (tests/scripts/triton_compile_check.py). Triton 3.6 (the GPU machine's)
# goes into a virtual environment under the build directory (about 15-60 s
# the first time; none is installed where Triton already imports). Registered
# by tests/CMakeLists.txt as device.triton; run with CCO_BIN=<build>/bin and
# CCO_SRC=<repo root>.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
lib=$(cd "$bin/../lib" && pwd)
# shellcheck source=tests/scripts/pyvenv.sh
source "$(dirname "$0")/pyvenv.sh"
cco_pyvenv "$bin/../pyvenv" "triton:triton==3.6.0"
"$CCO_PYTHON" -c "import triton" 2>/dev/null || { echo "FAIL: Triton is not importable and pip could not install it"; exit 1; }
echo "triton $("$CCO_PYTHON" -c 'import triton; print(triton.__version__)')"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/device_triton.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# A fresh Triton cache, so every kernel really compiles.
export TRITON_CACHE_DIR=$tmp/triton-cache
export CCO_DISABLE_JIT=1 CCO_LIBRARY=$lib/libcco.so PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
unset CCO_DEVICE_BC MORI_CCO_BC
"$CCO_PYTHON" "$src/tests/scripts/triton_compile_check.py" --arch 90 --expect-bitcode "$lib/libcco_device_sm90.bc"
