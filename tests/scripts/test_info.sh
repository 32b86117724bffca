#!/usr/bin/env bash
# cco-info: the environment table of -e reads as a table. Every variable's
# line has its "=" and its "[source]" in the same columns as every other
# line, with the default values, with a value longer than any default, and
# with the longest provider name (CCO_NET_PROVIDER once overflowed its
# column). Run by ctest with CCO_BIN=<build>/bin; prints one line per check
# and ends with "N passed, N failed".
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_info.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"

# aligned ENV...: cco-info -e under ENV prints one line per variable of the
# table, each with "=" and "[" at the same columns as the others.
aligned() {
  env "$@" "$bin/cco-info" -e >"$tmp/info" || return 1
  local lines columns
  lines=$(grep -c '^  CCO_[A-Z_0-9]* *= ' "$tmp/info")
  # The table has more variables than this; fewer lines means the format changed.
  [ "$lines" -ge 20 ] || { echo "only $lines variable lines"; return 1; }
  columns=$(grep '^  CCO_[A-Z_0-9]* *= ' "$tmp/info" |
    awk '{ print index($0, " = "), index($0, " [") }' | sort -u)
  echo "columns of ' = ' and ' [': $columns"
  [ "$(printf '%s\n' "$columns" | wc -l)" = 1 ] || { grep '^  CCO_' "$tmp/info"; return 1; }
}

check "defaults line up" aligned
check "a long value (CCO_DEBUG_FILE) lines up with the rest" \
  aligned CCO_DEBUG_FILE="$tmp/a-log-file-name-longer-than-any-default-value.%h.%p"
check "CCO_NET_PROVIDER=verbs;ofi_rxm lines up" aligned CCO_NET_PROVIDER="verbs;ofi_rxm"
# The value shown is the one in force, and the source says where it came from.
check "a set value shows with its variable as the source" \
  grep -q '^  CCO_NET_PROVIDER *= verbs;ofi_rxm *\[CCO_NET_PROVIDER\]$' "$tmp/info"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
