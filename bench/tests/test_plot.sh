#!/usr/bin/env bash
# bench/plot.py draws a PNG per figure from the lines the perf driver wrote
# for the CPU bootstrap benchmark, prints a Markdown line for each, and
# refuses a file that is not benchmark JSON lines. matplotlib is a real
# dependency of plot.py: it comes into a virtual environment under the build
# folder (tests/scripts/pyvenv.sh), and the test fails where it cannot be had.
# Run by ctest with CCO_BIN, CCO_SRC and CCO_BUILD.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
build=${CCO_BUILD:?set CCO_BUILD to the build directory}
# shellcheck source=tests/scripts/pyvenv.sh
source "$src/tests/scripts/pyvenv.sh"
cco_pyvenv "$build/pyvenv" matplotlib:matplotlib
[ -n "${CCO_PYTHON:-}" ] || { echo "FAIL: no python3"; exit 1; }
"$CCO_PYTHON" -c "import matplotlib" 2>/dev/null || {
  echo "FAIL: matplotlib cannot be imported by $CCO_PYTHON (and pip could not install it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

python3 "$src/bench/cco_perf.py" bootstrap --bin "$bin" --ranks 2,4 -n 100 -w 10 -o "$tmp/run.jsonl" \
  -- --reps 2 2>"$tmp/err" || { echo "FAIL: cco_perf bootstrap: $(cat "$tmp/err")"; exit 1; }
if "$CCO_PYTHON" "$src/bench/plot.py" "$tmp/run.jsonl" -o "$tmp/plots" >"$tmp/md" 2>"$tmp/err"; then pass
else fail "plot.py: exit $?: $(cat "$tmp/err")"; fi
for figure in host_barrier comm_create comm_destroy; do
  png=$tmp/plots/$figure.png
  # A PNG starts with \x89PNG.
  if [ -s "$png" ] && [ "$(head -c 4 "$png" | tail -c 3)" = PNG ]; then pass; else fail "no PNG $png"; fi
  if grep -qF "](plots/$figure.png)" "$tmp/md"; then pass; else fail "no Markdown line for $figure: $(cat "$tmp/md")"; fi
done
echo "not json" >"$tmp/bad.jsonl"
if ! "$CCO_PYTHON" "$src/bench/plot.py" "$tmp/bad.jsonl" -o "$tmp/bad" 2>"$tmp/err" && grep -q "not JSON" "$tmp/err"; then
  pass
else fail "plot.py took a file that is not JSON lines"; fi
echo "test_plot: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
