#!/usr/bin/env bash
# Source this file, then: cco_pyvenv <dir> <module:pip-package>...
# Makes (once) a virtual environment at <dir> that also sees the system's
# site-packages (so torch, cupy, numpy installed on the machine are used as
# they are) and pip-installs into it only the modules that cannot be imported.
# Nothing is ever installed into the system interpreter. On success it sets
# CCO_PYTHON to the environment's interpreter; where no environment can be
# made (no venv module) CCO_PYTHON is the system python3 and nothing is
# installed. Returns 0 in both cases; callers check the modules they need.
cco_pyvenv() {
  local dir=$1; shift
  CCO_PYTHON=$(command -v python3 || true)
  [ -n "$CCO_PYTHON" ] || return 0
  # Tests that share an environment run at the same time (ctest -j): one
  # making it or installing into it at a time, or the other finds a
  # half-made environment whose pip fails at once. The lock goes with the
  # subshell's descriptor when it returns.
  if command -v flock >/dev/null 2>&1; then
    mkdir -p "$(dirname "$dir")"
    (
      flock 9
      cco_pyvenv_locked "$dir" "$@"
    ) 9>"$dir.lock"
  else
    cco_pyvenv_locked "$dir" "$@"
  fi
  if [ -x "$dir/bin/python" ]; then CCO_PYTHON=$dir/bin/python; fi
  return 0
}

cco_pyvenv_locked() {
  local dir=$1; shift
  if [ ! -x "$dir/bin/python" ]; then
    if ! python3 -m venv --system-site-packages "$dir" >/dev/null 2>&1; then
      rm -rf "$dir"
      echo "pyvenv: python3 -m venv failed here (python3-venv missing?); using the system python3, installing nothing"
      return 0
    fi
  fi
  CCO_PYTHON=$dir/bin/python
  local pair mod pkg missing=""
  for pair in "$@"; do
    mod=${pair%%:*} pkg=${pair#*:}
    "$CCO_PYTHON" -c "import $mod" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    echo "pyvenv: installing$missing into $dir"
    # shellcheck disable=SC2086
    "$CCO_PYTHON" -m pip install -q --disable-pip-version-check $missing >/dev/null 2>&1 ||
      echo "pyvenv: pip could not install$missing (no package index here?)"
  fi
  return 0
}
