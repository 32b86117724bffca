#!/usr/bin/env bash
# GDA on CPUs (host platform: CPU threads post into the rings, each rank's
# proxy thread runs them over the network engine, tcp;ofi_rxm by default):
#  - mp_gda over two virtual hosts (CCO_HOSTID, one ccorun per host, two
#    ranks each, the id through --id-file) for both paths (CCO_GDA_PATH=direct
#    and staged) and the connection types CROSSNODE, FULL and RAIL: every op
#    at every scope, thread and doorbell mode, signal atomicity, signal after
#    data, gets and large puts, flushes, GDA barriers, a 16-slot ring flooded
#    from 4 threads, endpoint table, NoPeer / Invalid answers, async error;
#  - the traffic class of the requirements in the engine's hints, and a
#    second device communicator with another class refused;
#  - the staged path with the smallest staging area (64 KiB landing zones,
#    16 KiB chunks): large transfers wait for landing space; puts of up to
#    4 KiB inline (inside the inbox); its messages announced by their own
#    writes (notified writes, tcp;ofi_rxm); again with neither inline puts
#    nor notified writes (count adds); a bad CCO_GDA_INLINE_BYTES refused;
#  - one host: FULL with 2 ranks (both paths); CROSSNODE there, and NONE on two
#    hosts, give dc.gda == 0 and ccoDevUnsupported everywhere;
#  - a dead peer: a whole host SIGKILLed while the other streams puts to it
#    (both paths), the same with nothing in flight at the kill (the first
#    post comes after the death), one rank killed alone under a launcher of
#    its own (its same-host survivor learns it from a host barrier), and one
#    rank of a one-host FULL job: every survivor must see the failure
#    (ccoDevAborted, async error) within 20 s and exit cleanly;
#  - when the machine allows network namespaces (root, iproute2), the two
#    hosts again in two namespaces joined by a veth pair, the engine bound to
#    the veth (CCO_NET_DEVICES), CROSSNODE direct, FULL staged and a host kill.
# Skips (77) when the network engine cannot open here (no libfabric), or
# fails when CCO_TEST_REQUIRE_NET=1. Run by ctest with CCO_BIN=<build>/bin.
# Prints one line per check with its time and ends with "N passed, N failed".
#
# On a 2-core machine the whole script took 51-56 s (82 s in the ASan+UBSan
# build): a two-host mp_gda run 1.5-4.5 s, a kill 1.0-1.8 s (the survivors
# learn of the death from the liveness monitor within milliseconds, also with
# nothing in flight at the kill; without the monitor they first gave a silent
# peer 5 s, and such a check took about 7 s), the namespaces about 11 s.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
# Which half: "transfers" (the two-host and one-host runs), "faults" (dead
# peers, the example, the namespaces) or "all"; ctest runs the halves as two
# tests (script.test_gda, script.test_gda_faults) so they run side by side.
part=${CCO_TEST_GDA_PART:-all}
case $part in all | transfers | faults) ;; *) echo "FAIL: CCO_TEST_GDA_PART=$part (all, transfers, faults)"; exit 1 ;; esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
passed=0 failed=0 skipped=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_gda.XXXXXX") || exit 1
nsA="" nsB="" vA=""
cleanup() {
  [ -n "$nsA" ] && ip netns del "$nsA" 2>/dev/null
  [ -n "$nsB" ] && ip netns del "$nsB" 2>/dev/null
  [ -n "$vA" ] && ip link del "$vA" 2>/dev/null # left here only when setup stopped half way
  rm -rf "$tmp"
}
trap cleanup EXIT

# ------------------------------------------------------------ the engine
if ! "$bin/mp_gda" --probe >"$tmp/probe.out" 2>&1; then
  cat "$tmp/probe.out"
  if [ "${CCO_TEST_REQUIRE_NET:-0}" = 1 ]; then
    echo "FAIL: the network engine does not open here, and CCO_TEST_REQUIRE_NET=1"; exit 1
  fi
  echo "SKIP: the network engine does not open here"; exit 77
fi
sed 's/^/    /' "$tmp/probe.out"

# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"

# Every rank printed "mp_gda rank R: N passed, 0 failed" and nobody FAILed.
all_ranks_passed() { # nRanks, output file
  [ "$(grep -c '^mp_gda rank [0-9]*: [0-9]* passed, 0 failed$' "$2")" -eq "$1" ] && ! grep -q '^FAIL' "$2"
}

# hosts NHOSTS PER_HOST ENV... -- ARGS...: one launcher per host; host H
# (0, 1, ...) gets CCO_HOSTID=gda-H, ranks [H*PER_HOST, (H+1)*PER_HOST), the
# ENV assignments, and mp_gda ARGS. A command prefix per host (ip netns exec
# NS env ...) may come from the variable host_prefix_H. Returns 0 when every
# launcher exited 0 and every rank passed.
hosts() {
  local nh=$1 per=$2 sizes=() h; shift 2
  for ((h = 0; h < nh; h++)); do sizes+=("$per"); done
  hosts_of "${sizes[*]}" "$@"
}

# hosts_of "N0 N1 ..." ENV... -- ARGS...: as hosts, with N0 ranks on host 0,
# N1 on host 1, ... (hosts of different sizes).
hosts_of() {
  local -a sizes
  read -r -a sizes <<<"$1"
  shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local nh=${#sizes[@]} total=0 offsets=() pids=() h rc=0
  for ((h = 0; h < nh; h++)); do offsets[h]=$total; total=$((total + sizes[h])); done
  rm -f "$tmp/id"
  for ((h = nh - 1; h >= 0; h--)); do
    local prefix_var="host_prefix_$h"
    # shellcheck disable=SC2086
    ${!prefix_var:-} env "${envs[@]}" CCO_HOSTID="gda-$h" "$bin/ccorun" -t 150 -n "${sizes[h]}" --nranks "$total" \
      --rank-offset "${offsets[h]}" --id-file "$tmp/id" "$bin/mp_gda" "$@" >"$tmp/host$h.out" 2>&1 &
    pids[h]=$!
  done
  for ((h = 0; h < nh; h++)); do wait "${pids[h]}" || rc=1; done
  cat "$tmp"/host*.out >"$tmp/all.out"
  rm -f "$tmp"/host*.out
  cat "$tmp/all.out"
  [ $rc -eq 0 ] && all_ranks_passed "$total" "$tmp/all.out"
}

# Kill runs. The victims' launchers fail (their ranks die of SIGKILL); each
# survivor prints "kill: rank R ... noticed T s after the kill" and passes.
# kill_hosts PATH ARGS...: host b (ranks 2, 3) dies; host a survives.
kill_hosts() {
  local path=$1; shift
  rm -f "$tmp/id"
  CCO_GDA_PATH=$path CCO_HOSTID=gda-b "$bin/ccorun" -t 90 -n 2 --nranks 4 --rank-offset 2 --id-file "$tmp/id" \
    "$bin/mp_gda" --kill host "$@" >"$tmp/b.out" 2>&1 &
  local pb=$!
  CCO_GDA_PATH=$path CCO_HOSTID=gda-a "$bin/ccorun" -t 90 -n 2 --nranks 4 --id-file "$tmp/id" \
    "$bin/mp_gda" --kill host "$@" >"$tmp/a.out" 2>&1
  local ra=$?
  wait $pb
  local rb=$?
  cat "$tmp/a.out" "$tmp/b.out"
  [ $ra -eq 0 ] && [ $rb -ne 0 ] && all_ranks_passed 2 "$tmp/a.out" && [ "$(grep -c '^kill: rank' "$tmp/a.out")" -eq 2 ]
}
# kill_rank NHOSTS PATH ARGS...: 2 ranks per host, the last rank started
# alone and killed; every other rank survives.
kill_rank() {
  local nh=$1 path=$2; shift 2
  local total=$((2 * nh)) pids=() i rc=0
  rm -f "$tmp/id"
  CCO_GDA_PATH=$path CCO_HOSTID=gda-$((nh - 1)) "$bin/ccorun" -t 90 -n 1 --nranks $total --rank-offset $((total - 1)) \
    --id-file "$tmp/id" "$bin/mp_gda" --kill rank "$@" >"$tmp/victim.out" 2>&1 &
  local pv=$!
  for ((i = 0; i < total - 1; i++)); do
    CCO_GDA_PATH=$path CCO_HOSTID=gda-$((i / 2)) "$bin/ccorun" -t 90 -n 1 --nranks $total --rank-offset $i \
      --id-file "$tmp/id" "$bin/mp_gda" --kill rank "$@" >"$tmp/rank$i.out" 2>&1 &
    pids[i]=$!
  done
  for ((i = 0; i < total - 1; i++)); do wait "${pids[i]}" || rc=1; done
  wait $pv
  local rv=$?
  cat "$tmp"/rank*.out >"$tmp/surv.out"
  rm -f "$tmp"/rank*.out
  cat "$tmp/surv.out" "$tmp/victim.out"
  [ $rc -eq 0 ] && [ $rv -ne 0 ] && all_ranks_passed $((total - 1)) "$tmp/surv.out" &&
    [ "$(grep -c '^kill: rank' "$tmp/surv.out")" -eq $((total - 1)) ]
}

iters=1000 # signal-after-data iterations per peer
flood=2000 # ops per flood thread
# The sanitizer build (CCO_TEST_LIGHT=1, make test-asan) looks for memory
# errors, which show on the first iterations: a quarter of the ordering
# stress; the main build runs it all.
[ "${CCO_TEST_LIGHT:-0}" = 1 ] && iters=250 flood=500
summary='^(mp_gda:|ops:|atomic:|sad: rank 0|get:|flush:|barrier:|world barrier:|flood:|conn:|drain:|async:)'

if want transfers; then
  # ------------------------------------------------------- two virtual hosts
  for path in direct staged; do
    for conn in crossnode full rail; do
      check "2 hosts x 2 ranks, $path path, $conn" \
        hosts 2 2 CCO_GDA_PATH=$path -- --conn $conn --iters $iters --flood $flood
      show "$summary"
    done
  done
  # How the staged path announces its messages: by the message write itself
  # where the engine offers notified writes (tcp;ofi_rxm does), else by an
  # atomic add to the target's count word (CCO_NET_NOTIFY=0 forces that).
  # announced_by WHAT NOTIFY ENV...: a staged full run that says so on every rank.
  announced_by() {
    local what=$1 notify=$2; shift 2
    hosts 2 2 CCO_GDA_PATH=staged CCO_NET_NOTIFY="$notify" CCO_DEBUG=INFO CCO_DEBUG_SUBSYS=GDA "$@" -- --conn full \
      --iters 200 --flood 500 &&
      [ "$(grep -c "staged GDA path: .*, messages announced by $what\$" "$tmp/all.out")" -eq 4 ]
  }
  notify=1 what="their writes"
  [ "${CCO_NET_PROVIDER:-tcp;ofi_rxm}" = "tcp;ofi_rxm" ] || notify=0 what="count adds"
  check "2 hosts x 2 ranks, staged path, 64 KiB staging area, puts inline up to 4096 bytes, messages announced by $what, full" \
    announced_by "$what" $notify CCO_GDA_STAGING_BYTES=65536 CCO_GDA_INLINE_BYTES=4096
  show '^(get|sad: rank 0|flood):'
  check "2 hosts x 2 ranks, staged path, no inline puts, messages announced by count adds (CCO_NET_NOTIFY=0), full" \
    announced_by "count adds" 0 CCO_GDA_INLINE_BYTES=0
  show '^(get|sad: rank 0|flood):'
  # A bad inline limit fails the device communicator's creation, naming it.
  bad_inline() {
    ! hosts 2 1 CCO_GDA_PATH=staged CCO_GDA_INLINE_BYTES=5000 -- --conn crossnode &&
      grep -q 'CCO_GDA_INLINE_BYTES=5000: must be in 0..4096' "$tmp/all.out"
  }
  check "CCO_GDA_INLINE_BYTES=5000 refused at ccoDevCommCreate" bad_inline
  show 'CCO_GDA_INLINE_BYTES'
  check "2 hosts x 2 ranks, none: no GDA" hosts 2 2 CCO_GDA_PATH=direct -- --conn none
  show '^(conn|world barrier):'
  # reqs.gdaTrafficClass 104 (DSCP 26, in the upper six bits) reaches the
  # engine's hints on every rank (INFO log); another class is refused later.
  tclass_ok() {
    hosts 2 2 CCO_GDA_PATH=direct CCO_DEBUG=INFO CCO_DEBUG_SUBSYS=GDA -- --conn crossnode --tc 104 --only tclass &&
      [ "$(grep -c 'gdaTrafficClass 104: the engine asks for DSCP 26$' "$tmp/all.out")" -eq 4 ] &&
      [ "$(grep -c 'GDA proxy up, .* tclass asked 0x11a ' "$tmp/all.out")" -eq 4 ]
  }
  check "2 hosts x 2 ranks, gdaTrafficClass 104: DSCP 26 asked of the engine" tclass_ok
  show '^tclass:'
  # The world barrier's third step (LSA again) is what covers hosts of
  # different sizes: rank 3 of host 0 has no rail peer on host 1.
  for path in direct staged; do
    check "hosts of 3 and 1 ranks, $path path, crossnode: world barrier" \
      hosts_of "3 1" CCO_GDA_PATH=$path -- --conn crossnode --only world
    show '^(mp_gda:|world barrier:)'
  done

  # ---------------------------------------------------------------- one host
  for path in direct staged; do
    check "1 host x 2 ranks, $path path, full" hosts 1 2 CCO_GDA_PATH=$path -- --conn full --iters $iters --flood $flood
    show '^(sad: rank 0|flood|conn):'
  done
  check "1 host x 2 ranks, crossnode: no peers, no GDA" hosts 1 2 CCO_GDA_PATH=direct -- --conn crossnode
  show '^(conn|world barrier):'

fi

if want faults; then
  # ------------------------------------------------------------ dead peers
  for path in direct staged; do
    check "host b killed mid-transfer, $path path" kill_hosts $path --conn crossnode
    show '^kill:'
  done
  for path in direct staged; do
    check "host b killed with nothing in flight, $path path" kill_hosts $path --conn crossnode --idle
    show '^kill:'
  done
  check "rank 3 killed alone, staged path, crossnode" kill_rank 2 staged --conn crossnode
  show '^kill:'
  check "rank 1 of one host killed, direct path, full" kill_rank 1 direct --conn full
  show '^kill:'

  # ------------------------------------------------------------ example 05
  # The host twin of the GDA example, over two virtual hosts: every rank says
  # its puts were verified, and the job exits 0.
  example_ok() { # nRanks
    "$bin/ccorun" -t 120 -n "$1" --virtual-hosts 2 "$bin/cco-example-05-gda-put-host" >"$tmp/ex.out" 2>&1
    local rc=$?
    cat "$tmp/ex.out"
    [ $rc -eq 0 ] && [ "$(grep -c 'GDA puts to rank [0-9]* verified$' "$tmp/ex.out")" -eq "$1" ]
  }
  for n in 2 4; do
    check "cco-example-05-gda-put-host with $n ranks on 2 virtual hosts" example_ok "$n"
  done

  # ---------------------------------------------------- network namespaces
  netns_ok=0
  if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null; then
    tag=$$
    nsA=cco_ga_$tag nsB=cco_gb_$tag
    vA=gdaa$tag vB=gdab$tag
    vA=${vA:0:15} vB=${vB:0:15}
    if ip netns add "$nsA" 2>/dev/null && ip netns add "$nsB" 2>/dev/null &&
      ip link add "$vA" type veth peer name "$vB" 2>/dev/null &&
      ip link set "$vA" netns "$nsA" && ip link set "$vB" netns "$nsB" &&
      ip -n "$nsA" addr add 10.232.0.1/24 dev "$vA" && ip -n "$nsB" addr add 10.232.0.2/24 dev "$vB" &&
      ip -n "$nsA" link set lo up && ip -n "$nsB" link set lo up &&
      ip -n "$nsA" link set "$vA" up && ip -n "$nsB" link set "$vB" up; then
      netns_ok=1
    fi
  fi
  if [ $netns_ok -eq 1 ]; then
    # Bootstrap and engine both on the veth: nothing goes over a shared loopback.
    host_prefix_0="ip netns exec $nsA env CCO_SOCKET_IFNAME==$vA CCO_NET_DEVICES=$vA"
    host_prefix_1="ip netns exec $nsB env CCO_SOCKET_IFNAME==$vB CCO_NET_DEVICES=$vB"
    check "2 network namespaces x 2 ranks, direct path, crossnode" \
      hosts 2 2 CCO_GDA_PATH=direct -- --conn crossnode --iters 300 --flood 1000
    show '^(mp_gda:|sad: rank 0|get|flood):'
    check "2 network namespaces x 2 ranks, staged path, full" \
      hosts 2 2 CCO_GDA_PATH=staged -- --conn full --iters 300 --flood 1000
    show '^(mp_gda:|sad: rank 0|get|flood):'
    # The engine opens on the veth inside the namespace.
    probe_veth() { ip netns exec "$nsA" env CCO_NET_DEVICES="$vA" "$bin/mp_gda" --probe | tee /dev/stderr | grep -q "domain $vA "; }
    check "2 network namespaces: the engine opens on the veth" probe_veth
    show 'domain'
    kill_netns() {
      rm -f "$tmp/id"
      $host_prefix_1 CCO_GDA_PATH=staged CCO_HOSTID=gda-1 "$bin/ccorun" -t 90 -n 2 --nranks 4 --rank-offset 2 \
        --id-file "$tmp/id" "$bin/mp_gda" --conn crossnode --kill host >"$tmp/b.out" 2>&1 &
      local pb=$!
      $host_prefix_0 CCO_GDA_PATH=staged CCO_HOSTID=gda-0 "$bin/ccorun" -t 90 -n 2 --nranks 4 \
        --id-file "$tmp/id" "$bin/mp_gda" --conn crossnode --kill host >"$tmp/a.out" 2>&1
      local ra=$?
      wait $pb
      local rb=$?
      cat "$tmp/a.out" "$tmp/b.out"
      [ $ra -eq 0 ] && [ $rb -ne 0 ] && all_ranks_passed 2 "$tmp/a.out" && [ "$(grep -c '^kill: rank' "$tmp/a.out")" -eq 2 ]
    }
    check "2 network namespaces: namespace b's ranks killed, staged path" kill_netns
    show '^kill:'
    host_prefix_0="" host_prefix_1=""
  else
    skipped=$((skipped + 1))
    echo "skip network namespaces: needs root, iproute2 and permission to create namespaces"
  fi

fi

if [ "$skipped" -gt 0 ]; then echo "test_gda ($part): $passed passed, $failed failed, $skipped part skipped"
else echo "test_gda ($part): $passed passed, $failed failed"; fi
[ "$failed" -eq 0 ]
