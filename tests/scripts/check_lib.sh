# Helpers shared by the test scripts; source it after setting `tmp` (a
# scratch directory) and `passed=0 failed=0`.

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# check NAME COMMAND...: passes when COMMAND succeeds; prints its time, and
# its output's tail on failure. The output stays in $tmp/last.out.
check() {
  local name=$1; shift
  local t0; t0=$(now)
  if "$@" >"$tmp/last.out" 2>&1; then
    passed=$((passed + 1)); echo "ok   $name ($(elapsed "$t0") s)"
  else
    failed=$((failed + 1)); echo "FAIL $name ($(elapsed "$t0") s)"; tail -25 "$tmp/last.out" | sed 's/^/    /'
  fi
}
skip() { echo "SKIP $1"; }
# Prints the lines of the last check's output that match a pattern, indented.
show() { grep -E "$1" "$tmp/last.out" | sed 's/^/    /'; }
