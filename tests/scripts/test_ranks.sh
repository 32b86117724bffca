#!/usr/bin/env bash
# Jobs of 1, 2, 4, 8 and 16 ranks started by ccorun (one process per rank),
# on one host and playing several hosts (CCO_HOSTID per rank), plus the demo
# and the launcher's environment hand-off through ccoCommCreateFromEnv.
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

for n in 1 2 4 8 16; do
  check "mp_basic with $n ranks" "$bin/ccorun" -t 120 -n "$n" "$bin/mp_basic" --iters 500
done
check "8 ranks as 2 hosts" "$bin/ccorun" -t 120 -n 8 "$bin/mp_basic" --hosts 2 --iters 200
check "8 ranks as 4 hosts" "$bin/ccorun" -t 120 -n 8 "$bin/mp_basic" --hosts 4 --iters 200
check "16 ranks as 8 hosts" "$bin/ccorun" -t 120 -n 16 "$bin/mp_basic" --hosts 8 --iters 100
check "demo (4 ranks)" "$bin/ccorun" -t 60 -n 4 "$bin/cco-demo"
# A job split over two launchers on one machine, as two hosts would start it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
two_launchers() {
  "$bin/ccorun" -t 60 -n 2 --nranks 4 --rank-offset 2 --id-file "$tmp/id" "$bin/mp_basic" --iters 100 &
  local other=$!
  "$bin/ccorun" -t 60 -n 2 --nranks 4 --rank-offset 0 --id-file "$tmp/id" "$bin/mp_basic" --iters 100
  local a=$?
  wait $other
  local b=$?
  [ $a -eq 0 ] && [ $b -eq 0 ]
}
check "4 ranks from two launchers (--id-file)" two_launchers
# A bad environment value is a clear error naming the variable.
bad_env() {
  local out
  out=$(CCO_BOOTSTRAP_TIMEOUT=soon "$bin/ccorun" -t 30 -n 2 "$bin/mp_basic" 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "CCO_BOOTSTRAP_TIMEOUT='soon'"
}
check "bad CCO_BOOTSTRAP_TIMEOUT is refused by name" bad_env
# A rank whose id names a root that nobody listens at (an id left over from
# an earlier job) fails after CCO_BOOTSTRAP_TIMEOUT saying so.
stale_id() {
  local id out
  id=$("$bin/ccorun" -n 1 bash -c 'echo "$CCO_UNIQUE_ID"') || return 1
  out=$(CCO_BOOTSTRAP_TIMEOUT=1 "$bin/ccorun" -t 30 -n 1 --nranks 2 --rank-offset 1 --id "$id" \
    "$bin/mp_basic" 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "nothing listened at the root's address .* for 1 s (connection refused): rank 0 did not start, or the unique id is left over from an earlier job"
}
check "an id whose root never listens: the rank says so" stale_id
missing_env() {
  local out
  out=$("$bin/mp_basic" 2>&1)
  [ $? -ne 0 ]
}
check "mp_basic outside ccorun fails" missing_env
info_env() {
  "$bin/cco-info" -e | grep -q "MORI_SOCKET_IFNAME" &&
    MORI_SOCKET_IFNAME=lo "$bin/cco-info" -e | grep -q "CCO_SOCKET_IFNAME *= lo .*MORI_SOCKET_IFNAME" &&
    ! CCO_DEBUG=LOUD "$bin/cco-info" >/dev/null 2>&1
}
check "cco-info -e prints the table, aliases and refuses bad values" info_env
debug_file() {
  rm -f "$tmp"/log.*
  CCO_DEBUG=INFO CCO_DEBUG_SUBSYS=BOOT CCO_DEBUG_FILE="$tmp/log.%h.%p" \
    "$bin/ccorun" -t 30 -n 2 "$bin/mp_basic" --iters 10 >/dev/null 2>&1 || return 1
  # ccorun itself plus the two ranks each write their own file.
  [ "$(grep -l "cco INFO BOOT" "$tmp"/log.* | wc -l)" -ge 2 ] &&
    grep -q "listening on" "$tmp"/log.* &&
    ! CCO_DEBUG_SUBSYS=INIT CCO_DEBUG=INFO "$bin/ccorun" -t 30 -n 2 "$bin/mp_basic" --iters 10 2>&1 | grep -q "INFO BOOT"
}
check "CCO_DEBUG_FILE with %h/%p, CCO_DEBUG_SUBSYS filter" debug_file
echo "test_ranks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
