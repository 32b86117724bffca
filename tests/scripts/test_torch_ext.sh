#!/usr/bin/env bash
# The C++ sources of torch backend "CCO" (python/cco/csrc) compile:
# `python3 -m cco._torch_ext check` compiles each one without linking, the
# torch-facing ones against the installed torch's headers (torch is found,
# not imported: a machine without its CUDA libraries still has the headers),
# the kernels with nvcc. Run by ctest with CCO_BIN=<build>/bin and
# CCO_SRC=<repo root>.
#
# torch is looked for in the build's test environment (<build>/pyvenv-torch)
# and the system's python3. CCO_TEST_INSTALL_TORCH=1 (set by .ci/run)
# installs it into <build>/pyvenv-torch first: the wheel from PyPI without
# its dependencies, about a minute here (torch 2.15 on 2026-12-01, whose
# headers need C++20; the GPU machine's torch 2.11 builds with C++17:
# cco._torch_ext reads which from the headers). Without torch (or nvcc) the sources that need
# it are not compiled and the test ends with 77 (skipped) after checking the
# others; a compile error is a failure either way.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
build=$(cd "$bin/.." && pwd)
lib=$build/lib/libcco.so
[ -e "$lib" ] || { echo "FAIL: no $lib (build the library first)"; exit 1; }
# shellcheck source=tests/scripts/pyvenv.sh
source "$src/tests/scripts/pyvenv.sh"
python=$(command -v python3 || true)
[ -n "$python" ] || { echo "SKIP: no python3"; exit 77; }
if [ "${CCO_TEST_INSTALL_TORCH:-0}" = 1 ]; then
  cco_pyvenv "$build/pyvenv-torch"
  "$CCO_PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" ||
    "$CCO_PYTHON" -m pip install -q --disable-pip-version-check --no-deps torch ||
    echo "test_torch_ext: pip could not install torch"
fi
[ -x "$build/pyvenv-torch/bin/python" ] && python=$build/pyvenv-torch/bin/python
export CCO_LIBRARY=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
cd "$src" || exit 1
"$python" -m cco._torch_ext check
rc=$?
[ "$rc" -eq 77 ] && echo "SKIP (partly): sources above not compiled for lack of torch or nvcc"
exit "$rc"
