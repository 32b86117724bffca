#!/usr/bin/env bash
# Type check of the Python package: mypy over python/cco with the settings
# of mypy.ini (repository root), in a virtual environment under the build
# folder (tests/scripts/pyvenv.sh). Run by ctest with CCO_BIN=<build>/bin and
# CCO_SRC=<repo root>. Fails on any mypy error, and when mypy cannot be
# installed: a check that silently stops running protects nothing. 77
# (skipped) only where there is no python3 at all.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
build=$(cd "$bin/.." && pwd)

# mypy is pinned: a newer release may add checks, which should land as a
# change of this line, not as a failure out of nowhere. A venv of its own,
# so that it never races the Python tests' environment under ctest -j.
# shellcheck source=tests/scripts/pyvenv.sh
. "$src/tests/scripts/pyvenv.sh"
cco_pyvenv "$build/pyvenv-mypy" "mypy:mypy==2.4.1"
"$CCO_PYTHON" -c "import mypy" >/dev/null 2>&1 ||
  { echo "FAIL: mypy is not installed and pip could not install it"; exit 1; }

cd "$src" || exit 1
"$CCO_PYTHON" -m mypy --version
exec "$CCO_PYTHON" -m mypy --config-file mypy.ini --cache-dir "$build/mypy_cache"
