#!/usr/bin/env bash
# Symmetric memory and windows (tests/mp/mp_windows.c) on the host platform:
# 1, 2 and 4 ranks on one host, and 4 ranks playing 2 hosts.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
passed=0 failed=0
check() { # name, command...
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then
    passed=$((passed + 1)); echo "ok   $name"
  else
    failed=$((failed + 1)); echo "FAIL $name"; echo "$out" | tail -20 | sed 's/^/    /'
  fi
}
for n in 1 2 4; do
  check "mp_windows with $n ranks" "$bin/ccorun" -t 240 -n "$n" "$bin/mp_windows" --cycles 300
done
check "mp_windows, 4 ranks as 2 hosts" "$bin/ccorun" -t 240 -n 4 "$bin/mp_windows" --hosts 2 --cycles 100
echo "test_windows: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
