#!/usr/bin/env bash
# The Python package's tests (tests/python, pytest) on the host platform,
# against the libcco of this build. Run by ctest with CCO_BIN=<build>/bin
# and CCO_SRC=<repo root>. pytest, numpy and (when mpirun exists) mpi4py
# come from a virtual environment in <build>/pyenv that sees the system's
# packages and gets from pip only what the system lacks (pyvenv.sh); nothing
# is installed into the system interpreter. pytest's temporary folders go
# to <build>/pytest-tmp. Exits with pytest's code; "no tests collected" (5)
# counts as a failure; 77 (skipped) when python3 or pytest cannot be had.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
build=$(cd "$bin/.." && pwd)
lib=$build/lib/libcco.so
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[ -e "$lib" ] || { echo "FAIL: no $lib (build the library first)"; exit 1; }

# shellcheck source=tests/scripts/pyvenv.sh
source "$(dirname "$0")/pyvenv.sh"
# mpi4py only serves the mpirun test of examples/python/01_barrier.py.
modules="pytest:pytest numpy:numpy"
command -v mpirun >/dev/null && modules="$modules mpi4py:mpi4py"
# shellcheck disable=SC2086
cco_pyvenv "$build/pyenv" $modules
have() { "$CCO_PYTHON" -c "import $1" >/dev/null 2>&1; }
have pytest || { echo "SKIP: pytest is not installed and pip could not install it"; exit 77; }
have numpy || { echo "SKIP: numpy is not installed and pip could not install it"; exit 77; }
command -v mpirun >/dev/null && ! have mpi4py && echo "test_python: no mpi4py; the mpirun test is skipped"

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
# -rs: every skipped test says why (what did not run is never silent).
"$CCO_PYTHON" -m pytest -q -rs -p no:cacheprovider --basetemp="$build/pytest-tmp" tests/python
rc=$?
if [ "$rc" -eq 5 ]; then echo "test_python: pytest collected no tests"; exit 1; fi
exit "$rc"
