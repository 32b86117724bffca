#!/usr/bin/env bash
# Symmetric memory and windows (tests/mp/mp_windows.c) on the host platform:
# 1, 2 and 4 ranks on one host, and 4 ranks playing 2 hosts.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
passed=0 failed=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"
for n in 1 2 4; do
  check "mp_windows with $n ranks" "$bin/ccorun" -t 240 -n "$n" "$bin/mp_windows" --cycles 300
done
check "mp_windows, 4 ranks as 2 hosts" "$bin/ccorun" -t 240 -n 4 "$bin/mp_windows" --hosts 2 --cycles 100
echo "test_windows: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
