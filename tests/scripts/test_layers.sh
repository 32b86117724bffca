#!/usr/bin/env bash
# The layering check passes on src/, and fails on a copy of src/ with one
# planted violation of each kind (so a check that cannot fail is caught).
set -u
SRC=${CCO_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK="python3 $SRC/scripts/check_layers.py"
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check_lib.sh"

check "src/ passes the layering check" $CHECK "$SRC/src"

plant() { # plant FILE LINE: copy src/, add LINE to FILE, expect a failure naming FILE
  rm -rf "$tmp/src" && cp -r "$SRC/src" "$tmp/src"
  printf '%s\n' "$2" >>"$tmp/src/$1"
  local out rc
  out=$($CHECK "$tmp/src" 2>&1); rc=$?
  check "planted '$2' in $1 is refused" test "$rc" -ne 0
  check "the report names $1" grep -q "^$1:" <<<"$out"
}
plant base/log.c '#include "comm/comm.h"'
plant mem/mem.c '#include "transport/transport.h"'
plant platform/platform.c '#include "mem/mem.h"'
plant transport/sdma/sdma.c '#include "transport/gda/gda.h"'
plant transport/net/net_ofi.c '#include "transport/transport.h"'
plant boot/wire.c '#include "error.h"'
plant transport/lsa/lsa.c '#include "coll/coll.h"'
plant coll/coll_select.c '#include "comm/comm.h"'
echo "test_layers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
