#!/usr/bin/env bash
# The Python package's tests (tests/python, pytest) on the host platform,
# against the libcco of this build. Run by ctest with CCO_BIN=<build>/bin
# and CCO_SRC=<repo root>. Installs pytest and numpy with pip when missing
# (CI runs as root with PyPI access), and mpi4py when mpirun exists. Exits
# with pytest's code; "no tests collected" (5) counts as a failure; 77
# (skipped) when python3 or pytest cannot be had here.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
lib=$(cd "$bin/../lib" && pwd)/libcco.so
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[ -e "$lib" ] || { echo "FAIL: no $lib (build the library first)"; exit 1; }

have() { python3 -c "import $1" >/dev/null 2>&1; }
missing=""
for mod in pytest numpy; do have "$mod" || missing="$missing $mod"; done
if [ -n "$missing" ]; then
  echo "test_python: installing$missing"
  # shellcheck disable=SC2086
  python3 -m pip install -q $missing >/dev/null 2>&1 ||
    python3 -m pip install -q --break-system-packages $missing >/dev/null 2>&1
fi
have pytest || { echo "SKIP: pytest is not installed and pip could not install it"; exit 77; }
have numpy || { echo "SKIP: numpy is not installed and pip could not install it"; exit 77; }
# Optional: the mpirun test of examples/python/01_barrier.py needs mpi4py.
if command -v mpirun >/dev/null && ! have mpi4py; then
  python3 -m pip install -q mpi4py >/dev/null 2>&1 || echo "test_python: mpi4py not installable; the mpirun test is skipped"
fi

export CCO_LIBRARY=$lib CCO_BIN=$bin
export PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
# A sanitizer build's libcco needs its runtime loaded first into python;
# python itself leaks by design, so leak checking stays off here.
if command -v ldd >/dev/null && ldd "$lib" | grep -q libasan; then
  asan=$(ldd "$lib" | awk '/libasan/ {print $3}')
  ubsan=$(ldd "$lib" | awk '/libubsan/ {print $3}')
  export LD_PRELOAD="$asan${ubsan:+ $ubsan}"
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
cd "$src" || exit 1
python3 -m pytest -q -p no:cacheprovider tests/python
rc=$?
if [ "$rc" -eq 5 ]; then echo "test_python: pytest collected no tests"; exit 1; fi
exit "$rc"
