#!/usr/bin/env bash
# The Python wheel as a user gets it: `pip wheel` of the repository (the
# root pyproject.toml: scikit-build-core runs this CMake), installed into a
# fresh virtual environment, then the package, its own libcco and headers,
# the version, and a Python example under the wheel's ccorun, with
# CCO_LIBRARY, PYTHONPATH and LD_LIBRARY_PATH unset. The build must leave
# the checkout as it was.
# Run by ctest with CCO_BUILD=<build dir> and CCO_SRC=<repo root>; the main
# build registers it. Needs python3 with venv, and a package index for pip's
# build isolation (it fetches scikit-build-core). Prints one line per check
# and ends with "N passed, N failed".
set -u
build=${CCO_BUILD:?set CCO_BUILD to the build directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_wheel.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/check_lib.sh
source "$src/tests/scripts/check_lib.sh"
# shellcheck source=tests/scripts/pyvenv.sh
source "$src/tests/scripts/pyvenv.sh"

unset LD_LIBRARY_PATH CCO_LIBRARY PYTHONPATH CCO_INCLUDE_DIR CCO_BIN
export CCO_PLATFORM=host CCO_IGNORE_CPU_AFFINITY=1 PIP_DISABLE_PIP_VERSION_CHECK=1
version=$(sed -n 's/^#define CCO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$src/include/cco/cco.h" |
  paste -sd.)
command -v python3 >/dev/null || { echo "FAIL no python3"; exit 1; }

# What git sees of the checkout, ignored directories included (a build
# directory left in the tree would be ignored; one that already was, like
# the build folder holding the builder's environment, stays one line);
# __pycache__ comes and goes with other tests running from the checkout.
checkout_state() {
  git -C "$src" status --porcelain --ignored | grep -v '__pycache__/' | sort
}
in_git=0
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  in_git=1
  checkout_state >"$tmp/before"
fi

# The builder: a virtual environment under the build folder, so nothing is
# installed into the system interpreter; pip's build isolation fetches
# scikit-build-core into a throwaway environment of its own.
cco_pyvenv "$build/pyvenv-wheel"
# The collectives' GPU kernels are left out of this wheel: nvcc takes minutes
# to compile them for three architectures on two cores, the main build has
# compiled the same source already, and nothing here can run them. A wheel
# built for users embeds them (pyproject.toml leaves CCO_COLL_KERNELS on).
export SKBUILD_CMAKE_DEFINE="CCO_COLL_KERNELS=OFF${SKBUILD_CMAKE_DEFINE:+;$SKBUILD_CMAKE_DEFINE}"
build_wheel() {
  "$CCO_PYTHON" -m pip wheel "$src" --no-deps -w "$tmp/wheelhouse" && ls "$tmp/wheelhouse"/cco_comm-"$version"-*.whl
}
check "pip wheel of the repository: cco_comm-$version (scikit-build-core, this CMake)" build_wheel
show '\.whl$'
wheel=$(ls "$tmp"/wheelhouse/cco_comm-*.whl 2>/dev/null | head -1)
if [ -z "$wheel" ]; then
  grep -qiE 'connection|network|resolve|index' "$tmp/last.out" &&
    echo "    (pip could not reach a package index for scikit-build-core)"
  echo "$passed passed, $failed failed"
  exit 1
fi

contents() {
  python3 - "$wheel" <<'EOF'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["cco/__init__.py", "cco/_build_version.py", "cco/lib/libcco.so.0", "cco/bin/ccorun", "cco/bin/cco-info",
        "cco/include/cco/cco.h", "cco/include/cco/device/impl/lsa_impl.h", "cco/nvrtc/stdint.h",
        "cco/csrc/symm_mem.cpp", "cco/csrc/signal_kernels.cu", "cco/csrc/cco_symm_mem.h"]
missing = [n for n in need if n not in names]
# Only what the package needs: no archive, no CMake package, no tests.
extra = [n for n in names if n.endswith(".a") or "/cmake/" in n or "pkgconfig" in n or n.startswith("tests/")]
print("missing:", missing, "unexpected:", extra)
sys.exit(1 if missing or extra else 0)
EOF
}
check "wheel holds cco/lib/libcco.so.0, cco/bin/{ccorun,cco-info}, cco/include/cco/**, the torch backend's cco/csrc/** and nothing of the development files" contents

if [ "$in_git" = 1 ]; then
  unchanged() { checkout_state >"$tmp/after"; diff "$tmp/before" "$tmp/after"; }
  check "the build left the checkout as it was (git status, ignored files too)" unchanged
else
  skip "checkout cleanliness: $src is not a git work tree"
fi

venv=$tmp/venv
fresh_install() { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q --no-deps "$wheel"; }
check "the wheel installs into a fresh virtual environment" fresh_install

# The user's shell: the environment's bin first on PATH, elsewhere than the checkout.
in_venv() { (cd "$tmp" && PATH="$venv/bin:$PATH" "$@"); }
package_is_self_contained() {
  in_venv python - "$venv" <<'EOF'
import sys
import cco
venv = sys.argv[1]
checks = {
    "package from the environment": cco.__file__.startswith(venv),
    "its own libcco": cco.library_path().startswith(venv) and "/cco/lib/libcco.so" in cco.library_path(),
    "__version__ is ccoGetVersion's": cco.__version__ == "%d.%d.%d" % cco.version(),
    "its own headers": cco.cuda.include_dirs()[0].startswith(venv),
}
print(cco.__version__, cco.library_path(), cco.cuda.include_dirs(), checks)
sys.exit(0 if all(checks.values()) else 1)
EOF
}
check "import cco: the environment's package, its own cco/lib/libcco.so.0 and headers; __version__ $version is ccoGetVersion's" \
  package_is_self_contained

# The device bitcode for Triton, where this machine's clang built it (the wheel's build did too):
# inside the wheel, and found there by the installed package with the compile step turned off.
if [ -e "$build/lib/libcco_device_sm90.bc" ]; then
  bitcode_from_wheel() {
    CCO_DISABLE_JIT=1 in_venv python - "$venv" <<'EOF'
import sys
from cco.ir.bitcode import find_cco_bitcode
path = find_cco_bitcode(90)
print(path)
sys.exit(0 if path.startswith(sys.argv[1]) and path.endswith("/cco/lib/cco/libcco_device_sm90.bc") else 1)
EOF
  }
  check "the wheel's device bitcode (cco/lib/cco/libcco_device_sm90.bc) is what the installed package finds" \
    bitcode_from_wheel
else
  skip "device bitcode: this build made none (no clang-19), so the wheel has none either"
fi
show '^[0-9]'

check "cco-info on PATH (the wheel's console script) runs" in_venv cco-info
example_ok() {
  local out
  [ "$(in_venv command -v ccorun)" = "$venv/bin/ccorun" ] || { echo "ccorun on PATH is not the wheel's"; return 1; }
  # Unbuffered, as many CI images run Python: each rank's line must still be one write.
  out=$(PYTHONUNBUFFERED=1 in_venv ccorun -t 120 -n 2 python "$src/examples/python/01_barrier.py") || { echo "$out"; return 1; }
  echo "$out"
  [ "$(grep -c '^01_barrier rank ./2 (ccorun, host.*; ok$' <<<"$out")" -eq 2 ]
}
check "ccorun -n 2 python examples/python/01_barrier.py with the wheel's ccorun" example_ok
show '^01_barrier'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
